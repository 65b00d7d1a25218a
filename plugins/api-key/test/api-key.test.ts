import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { startTestApp, type TestApp } from '../../../test/support/harness.ts';

describe('ApiKeyRpc', () => {
  let t: TestApp;
  let owner: Awaited<ReturnType<TestApp['signup']>>;

  before(async () => {
    t = await startTestApp();
    owner = await t.signup();
  });
  after(() => t.close());

  const create = (description = 'ci pipeline', initialContext?: string | null) =>
    t.ok('ApiKeyRpc.create', { description, ...(initialContext !== undefined ? { initialContext } : {}) }, { token: owner.token });

  it('creates a key whose full value is shown once and authenticates as its owner', async () => {
    const key = await create('deploy bot', '{"projectId":"p-42","serviceCode":"crm"}');
    assert.match(key.fullKey, /^ak[0-9a-f]{14}_[A-Za-z0-9_-]{43}$/);
    assert.equal(key.fullKey.split('_')[0], key.prefix);
    assert.match(key.keyHash, /^[0-9a-f]{64}$/);
    assert.ok(key.encryptedKey.startsWith('k1.') && !key.encryptedKey.includes(key.fullKey));
    assert.equal(key.description, 'deploy bot');
    assert.equal(key.isEnabled, true);
    assert.equal(key.userId, owner.user._id);
    assert.equal(key.subscriptionId, owner.subscriptionId);
    assert.deepEqual(key.initialContext, { projectId: 'p-42', serviceCode: 'crm' });
    assert.equal(key.webhookUrl, null);
    assert.ok(!Number.isNaN(Date.parse(key.createdAt)));

    const me = await t.ok('NoteRpc.whoAmI', {}, { apiKey: key.fullKey });
    assert.equal(me.userId, owner.user._id);
    assert.equal(me.subscriptionId, owner.subscriptionId);
    assert.equal(me.apiKeyId, key._id);
    assert.equal(me.role, 'admin');
    assert.equal(me.projectId, 'p-42');
    assert.deepEqual(me.extra, { projectId: 'p-42', serviceCode: 'crm' });
  });

  it('never lets initialContext override who the caller is', async () => {
    const key = await create('sneaky', JSON.stringify({ subscriptionId: 'other', userId: 'other', role: 'admin' }));
    const me = await t.ok('NoteRpc.whoAmI', {}, { apiKey: key.fullKey });
    assert.equal(me.subscriptionId, owner.subscriptionId);
    assert.equal(me.userId, owner.user._id);
  });

  it('lists keys without key material', async () => {
    const list = await t.ok('ApiKeyRpc.getData', {}, { token: owner.token });
    assert.equal(list.totalCount, list.data.length);
    assert.ok(list.totalCount >= 2);
    for (const record of list.data) {
      for (const field of ['fullKey', 'keyHash', 'encryptedKey']) assert.equal(field in record, false, field);
      assert.deepEqual(
        Object.keys(record).sort(),
        [
          '_id',
          'createdAt',
          'description',
          'initialContext',
          'isEnabled',
          'lastTestedAt',
          'prefix',
          'rateLimitPerMinute',
          'readOnly',
          'scopes',
          'subscriptionId',
          'updatedAt',
          'userId',
          'webhookSecret',
          'webhookStatus',
          'webhookUrl',
        ].sort(),
      );
    }
  });

  it('validates description and initialContext, naming the field, and creates nothing', async () => {
    const before = (await t.ok('ApiKeyRpc.getData', {}, { token: owner.token })).totalCount;
    for (const [params, field] of [
      [{ description: '' }, 'description'],
      [{}, 'description'],
      [{ description: 'x', initialContext: 'not json' }, 'initialContext'],
      [{ description: 'x', initialContext: '[1,2]' }, 'initialContext'],
      [{ description: 'x', initialContext: '"text"' }, 'initialContext'],
      [{ description: 'x', initialContext: 42 }, 'initialContext'],
    ] as const) {
      const response = await t.call('ApiKeyRpc.create', params, { token: owner.token });
      assert.equal(response.status, 400, JSON.stringify(params));
      assert.equal(response.body.data.code, 'VALIDATION_ERROR');
      assert.ok(
        response.body.data.issues.some((issue: any) => issue.path === field),
        JSON.stringify(response.body),
      );
      assert.match(response.body.data.error, new RegExp(field));
    }
    assert.equal((await t.ok('ApiKeyRpc.getData', {}, { token: owner.token })).totalCount, before);
  });

  it('updates description and context; null or empty text clears the context', async () => {
    const key = await create('before', '{"projectId":"a"}');
    const updated = await t.ok('ApiKeyRpc.update', { _id: key._id, description: 'after', initialContext: '{"projectId":"b"}' }, { token: owner.token });
    assert.equal(updated.description, 'after');
    assert.deepEqual(updated.initialContext, { projectId: 'b' });
    assert.equal('fullKey' in updated, false);
    assert.equal((await t.ok('NoteRpc.whoAmI', {}, { apiKey: key.fullKey })).projectId, 'b');
    assert.equal((await t.ok('ApiKeyRpc.update', { _id: key._id, initialContext: '' }, { token: owner.token })).initialContext, null);
    await t.ok('ApiKeyRpc.update', { _id: key._id, initialContext: '{"x":1}' }, { token: owner.token });
    assert.equal((await t.ok('ApiKeyRpc.update', { _id: key._id, initialContext: null }, { token: owner.token })).initialContext, null);
    const bad = await t.call('ApiKeyRpc.update', { _id: key._id, initialContext: '{' }, { token: owner.token });
    assert.equal(bad.body.data.code, 'VALIDATION_ERROR');
    const list = await t.ok('ApiKeyRpc.getData', {}, { token: owner.token });
    assert.equal(list.data.find((record: any) => record._id === key._id).initialContext, null);
  });

  it('refuses a disabled key at once and accepts it again when re-enabled', async () => {
    const key = await create();
    await t.ok('NoteRpc.whoAmI', {}, { apiKey: key.fullKey }); // now cached
    await t.ok('ApiKeyRpc.update', { _id: key._id, isEnabled: false }, { token: owner.token });
    const refused = await t.call('NoteRpc.whoAmI', {}, { apiKey: key.fullKey });
    assert.equal(refused.status, 401);
    assert.equal(refused.body.data.code, 'UNAUTHENTICATED');
    assert.match(refused.body.data.error, /disabled/);
    await t.ok('ApiKeyRpc.update', { _id: key._id, isEnabled: true }, { token: owner.token });
    await t.ok('NoteRpc.whoAmI', {}, { apiKey: key.fullKey });
  });

  it('refuses a deleted key at once', async () => {
    const key = await create();
    await t.ok('NoteRpc.whoAmI', {}, { apiKey: key.fullKey });
    assert.deepEqual(await t.ok('ApiKeyRpc.delete', { _id: key._id }, { apiKey: key.fullKey }), { success: true });
    const refused = await t.call('NoteRpc.whoAmI', {}, { apiKey: key.fullKey });
    assert.equal(refused.status, 401);
    const again = await t.call('ApiKeyRpc.delete', { _id: key._id }, { token: owner.token });
    assert.equal(again.status, 404);
    assert.equal(again.body.data.code, 'NOT_FOUND');
  });

  it('refuses missing, malformed and forged keys', async () => {
    const key = await create();
    const forged = `${key.prefix}_${'A'.repeat(43)}`;
    for (const apiKey of ['nonsense', `${key.prefix}_short`, forged, `ak0000000000000_${'B'.repeat(43)}`]) {
      const response = await t.call('ApiKeyRpc.getData', {}, { apiKey });
      assert.equal(response.status, 401, apiKey);
      assert.equal(response.body.data.code, 'UNAUTHENTICATED');
    }
    // A forged secret with a known prefix fails even while the real key is cached.
    await t.ok('ApiKeyRpc.getData', {}, { apiKey: key.fullKey });
    assert.equal((await t.call('ApiKeyRpc.getData', {}, { apiKey: forged })).status, 401);
  });

  it('keeps keys of one subscription invisible to another', async () => {
    const mine = await create('mine');
    const other = await t.signup();
    const theirs = await t.ok('ApiKeyRpc.create', { description: 'theirs' }, { token: other.token });

    const otherList = await t.ok('ApiKeyRpc.getData', {}, { token: other.token });
    assert.deepEqual(
      otherList.data.map((record: any) => record._id),
      [theirs._id],
    );

    for (const [method, params] of [
      ['ApiKeyRpc.update', { _id: mine._id, description: 'hijacked' }],
      ['ApiKeyRpc.update', { _id: mine._id, isEnabled: false }],
      ['ApiKeyRpc.delete', { _id: mine._id }],
    ] as const) {
      const response = await t.call(method, params, { token: other.token });
      assert.equal(response.status, 404, method);
      assert.equal(response.body.data.code, 'NOT_FOUND');
      assert.equal(response.body.data.error, `API key ${mine._id} not found`);
    }
    const missing = await t.call('ApiKeyRpc.delete', { _id: '00000000-0000-4000-8000-000000000000' }, { token: other.token });
    assert.equal(missing.body.data.error, 'API key 00000000-0000-4000-8000-000000000000 not found');

    const still = (await t.ok('ApiKeyRpc.getData', {}, { token: owner.token })).data.find((r: any) => r._id === mine._id);
    assert.equal(still.description, 'mine');
    assert.equal(still.isEnabled, true);
    await t.ok('NoteRpc.whoAmI', {}, { apiKey: mine.fullKey });
  });

  it('rejects an _id that is not a UUID as a validation error', async () => {
    const response = await t.call('ApiKeyRpc.delete', { _id: 'abc' }, { token: owner.token });
    assert.equal(response.status, 400);
    assert.deepEqual(response.body.data.issues, [{ path: '_id', message: '_id must be a UUID' }]);
  });

  it('stores only the hash and the sealed copy of a key', async () => {
    const key = await create();
    const [row] = await t.app.deps.db.execute<Record<string, string>>('select * from api_key where id = ?', [key._id]);
    assert.ok(row);
    assert.ok(!JSON.stringify(row).includes(key.fullKey.slice(key.fullKey.indexOf('_') + 1)));
    assert.equal(await t.app.deps.keyring.open(owner.subscriptionId, row.encrypted_key!), key.fullKey);
  });

  it('seals keys stored under the master key itself again under the subscription data key', async () => {
    const key = await create('from before the keyring');
    const { db, secretBox } = t.app.deps;
    await db.execute('update api_key set encrypted_key = ? where id = ?', [secretBox.encrypt(key.fullKey), key._id]);
    assert.ok((await t.app.depsOf('api-key').apiKeyService.resealLegacy()) >= 1);
    const [row] = await db.execute<{ encrypted_key: string }>('select encrypted_key from api_key where id = ?', [key._id]);
    assert.ok(row!.encrypted_key.startsWith('k1.'));
    assert.equal(await t.app.deps.keyring.open(owner.subscriptionId, row!.encrypted_key), key.fullKey);
  });
});
