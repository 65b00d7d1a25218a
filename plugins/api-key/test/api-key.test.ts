import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { refused } from '../../../test/support/caller.ts';
import { startTestApp, type TestApp } from '../../../test/support/harness.ts';

/** What NoteRpc.whoAmI (the example plugin's) answers: the calling context. */
interface WhoAmI {
  subscriptionId: string;
  userId: string;
  role: string;
  apiKeyId: string | null;
  projectId: string | null;
  extra: unknown;
}

describe('ApiKeyRpc', () => {
  let t: TestApp;
  let owner: Awaited<ReturnType<TestApp['signup']>>;

  before(async () => {
    t = await startTestApp();
    owner = await t.signup();
  });
  after(() => t.close());

  const create = (description = 'ci pipeline', initialContext?: string | null) =>
    t.as(owner).ApiKeyRpc.create({ description, ...(initialContext !== undefined ? { initialContext } : {}) });
  /** The calling context of an API key, as the example plugin reads it. */
  const whoAmI = (apiKey: string) => t.as({ apiKey }).call<WhoAmI>('NoteRpc.whoAmI');

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

    const me = await whoAmI(key.fullKey);
    assert.equal(me.userId, owner.user._id);
    assert.equal(me.subscriptionId, owner.subscriptionId);
    assert.equal(me.apiKeyId, key._id);
    assert.equal(me.role, 'admin');
    assert.equal(me.projectId, 'p-42');
    assert.deepEqual(me.extra, { projectId: 'p-42', serviceCode: 'crm' });
  });

  it('never lets initialContext override who the caller is', async () => {
    const key = await create('sneaky', JSON.stringify({ subscriptionId: 'other', userId: 'other', role: 'admin' }));
    const me = await whoAmI(key.fullKey);
    assert.equal(me.subscriptionId, owner.subscriptionId);
    assert.equal(me.userId, owner.user._id);
  });

  it('lists keys without key material', async () => {
    const list = await t.as(owner).ApiKeyRpc.getData();
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
    const before = (await t.as(owner).ApiKeyRpc.getData()).totalCount;
    for (const [params, field] of [
      [{ description: '' }, 'description'],
      [{}, 'description'],
      [{ description: 'x', initialContext: 'not json' }, 'initialContext'],
      [{ description: 'x', initialContext: '[1,2]' }, 'initialContext'],
      [{ description: 'x', initialContext: '"text"' }, 'initialContext'],
      [{ description: 'x', initialContext: 42 }, 'initialContext'],
    ] as const) {
      const error = await refused(t.as(owner).call('ApiKeyRpc.create', params), 'VALIDATION_ERROR', JSON.stringify(params));
      assert.ok(
        error.issues?.some((issue) => issue.path === field),
        JSON.stringify(error),
      );
      assert.match(error.message, new RegExp(field));
    }
    assert.equal((await t.as(owner).ApiKeyRpc.getData()).totalCount, before);
  });

  it('updates description and context; null or empty text clears the context', async () => {
    const key = await create('before', '{"projectId":"a"}');
    const updated = await t.as(owner).ApiKeyRpc.update({ _id: key._id, description: 'after', initialContext: '{"projectId":"b"}' });
    assert.equal(updated.description, 'after');
    assert.deepEqual(updated.initialContext, { projectId: 'b' });
    assert.equal('fullKey' in updated, false);
    assert.equal((await whoAmI(key.fullKey)).projectId, 'b');
    assert.equal((await t.as(owner).ApiKeyRpc.update({ _id: key._id, initialContext: '' })).initialContext, null);
    await t.as(owner).ApiKeyRpc.update({ _id: key._id, initialContext: '{"x":1}' });
    assert.equal((await t.as(owner).ApiKeyRpc.update({ _id: key._id, initialContext: null })).initialContext, null);
    await refused(t.as(owner).ApiKeyRpc.update({ _id: key._id, initialContext: '{' }), 'VALIDATION_ERROR');
    const list = await t.as(owner).ApiKeyRpc.getData();
    assert.equal(list.data.find((record) => record._id === key._id)?.initialContext, null);
  });

  it('refuses a disabled key at once and accepts it again when re-enabled', async () => {
    const key = await create();
    await whoAmI(key.fullKey); // now cached
    await t.as(owner).ApiKeyRpc.update({ _id: key._id, isEnabled: false });
    const error = await refused(whoAmI(key.fullKey), 'UNAUTHENTICATED');
    assert.match(error.message, /disabled/);
    await t.as(owner).ApiKeyRpc.update({ _id: key._id, isEnabled: true });
    await whoAmI(key.fullKey);
  });

  it('refuses a deleted key at once', async () => {
    const key = await create();
    await whoAmI(key.fullKey);
    assert.deepEqual(await t.as({ apiKey: key.fullKey }).ApiKeyRpc.delete({ _id: key._id }), { success: true });
    await refused(whoAmI(key.fullKey), 'UNAUTHENTICATED');
    await refused(t.as(owner).ApiKeyRpc.delete({ _id: key._id }), 'NOT_FOUND');
  });

  it('refuses missing, malformed and forged keys', async () => {
    const key = await create();
    const forged = `${key.prefix}_${'A'.repeat(43)}`;
    for (const apiKey of ['nonsense', `${key.prefix}_short`, forged, `ak0000000000000_${'B'.repeat(43)}`]) {
      await refused(t.as({ apiKey }).ApiKeyRpc.getData(), 'UNAUTHENTICATED', apiKey);
    }
    // A forged secret with a known prefix fails even while the real key is cached.
    await t.as({ apiKey: key.fullKey }).ApiKeyRpc.getData();
    await refused(t.as({ apiKey: forged }).ApiKeyRpc.getData(), 'UNAUTHENTICATED');
  });

  it('keeps keys of one subscription invisible to another', async () => {
    const mine = await create('mine');
    const other = await t.signup();
    const theirs = await t.as(other).ApiKeyRpc.create({ description: 'theirs' });

    const otherList = await t.as(other).ApiKeyRpc.getData();
    assert.deepEqual(
      otherList.data.map((record) => record._id),
      [theirs._id],
    );

    const asOther = t.as(other).ApiKeyRpc;
    for (const [method, call] of [
      ['update', () => asOther.update({ _id: mine._id, description: 'hijacked' })],
      ['update', () => asOther.update({ _id: mine._id, isEnabled: false })],
      ['delete', () => asOther.delete({ _id: mine._id })],
    ] as const) {
      const error = await refused(call(), 'NOT_FOUND', method);
      assert.equal(error.message, `API key ${mine._id} not found`);
    }
    const missing = await refused(asOther.delete({ _id: '00000000-0000-4000-8000-000000000000' }), 'NOT_FOUND');
    assert.equal(missing.message, 'API key 00000000-0000-4000-8000-000000000000 not found');

    const still = (await t.as(owner).ApiKeyRpc.getData()).data.find((r) => r._id === mine._id);
    assert.equal(still?.description, 'mine');
    assert.equal(still?.isEnabled, true);
    await whoAmI(mine.fullKey);
  });

  it('rejects an _id that is not a UUID as a validation error', async () => {
    const error = await refused(t.as(owner).ApiKeyRpc.delete({ _id: 'abc' }), 'VALIDATION_ERROR');
    assert.deepEqual(error.issues, [{ path: '_id', message: '_id must be a UUID' }]);
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
