import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import type { BusEvent } from 'rpc-service/plugin';
import { startTestApp, type TestApp } from '../../../test/support/harness.ts';
import { addUser } from '../../../test/support/users.ts';

const VALUE = 'sk_live_51Hx9zQpRd3tVALUEmarker';

describe('SecretsRpc', () => {
  let t: TestApp;
  let admin: Awaited<ReturnType<TestApp['signup']>>;
  let member: Awaited<ReturnType<typeof addUser>>;
  let adminKey: { _id: string; fullKey: string };
  const events: BusEvent[] = [];
  const as = (token: string) => ({ token });

  before(async () => {
    t = await startTestApp({ withNotes: false, plugins: ['secrets', 'api-key'] });
    admin = await t.signup();
    member = await addUser(t, admin.subscriptionId, 'user');
    adminKey = await t.ok('ApiKeyRpc.create', { description: 'ops' }, as(admin.token));
    t.app.deps.bus.subscribe('secret.changed', (event) => void events.push(event));
  });
  after(() => t.close());

  const create = (params: Record<string, unknown>, token = admin.token) => t.ok('SecretsRpc.create', params, as(token));

  it('creates a secret shaped {_id, zone, key, description}, its value sealed at rest', async () => {
    const secret = await create({ zone: 'production', key: 'STRIPE_KEY', value: VALUE, description: 'Stripe live key' });
    assert.deepEqual(secret, { _id: 'production:STRIPE_KEY', zone: 'production', key: 'STRIPE_KEY', description: 'Stripe live key' });
    const noDescription = await create({ zone: 'common', key: 'SENTRY_DSN', value: 'https://sentry.example/1' });
    assert.equal(noDescription.description, '');

    const [row] = await t.app.deps.db.execute<{ value: string }>(`select value from secrets where zone = 'production' and key = 'STRIPE_KEY'`);
    assert.ok(row!.value.startsWith('k1.'));
    assert.ok(!row!.value.includes(VALUE));
  });

  it('refuses empty keys and values, bad zones and duplicates, changing nothing', async () => {
    for (const [params, path] of [
      [{ zone: 'common', key: '', value: 'x' }, 'key'],
      [{ zone: 'common', key: 'A', value: '' }, 'value'],
      [{ zone: '', key: 'A', value: 'x' }, 'zone'],
      [{ zone: 'com:mon', key: 'A', value: 'x' }, 'zone'],
      [{ zone: 'common', value: 'x' }, 'key'],
      [{ zone: 'common', key: 'A' }, 'value'],
    ] as const) {
      const response = await t.call('SecretsRpc.create', params, as(admin.token));
      assert.equal(response.status, 400, JSON.stringify(params));
      assert.equal(response.body.data.code, 'VALIDATION_ERROR');
      assert.deepEqual(
        response.body.data.issues.map((issue: { path: string }) => issue.path),
        [path],
      );
    }
    const duplicate = await t.call('SecretsRpc.create', { zone: 'production', key: 'STRIPE_KEY', value: 'other' }, as(admin.token));
    assert.equal(duplicate.status, 409);
    assert.equal(duplicate.body.data.code, 'CONFLICT');
    const { value } = await t.ok('SecretsRpc.getSecretValue', { zone: 'production', key: 'STRIPE_KEY' }, as(admin.token));
    assert.equal(value, VALUE);
  });

  it('lists definitions with defaults page 1 and pageSize 25, filters and both sort spellings', async () => {
    for (let index = 0; index < 27; index++) {
      await create({ zone: 'bulk', key: `KEY_${String(index).padStart(2, '0')}`, value: `v${index}`, description: index % 2 ? 'Odd ONE' : 'even' });
    }
    const first = await t.ok('SecretsRpc.getData', { filter: { zone: 'bulk' } }, as(member.token));
    assert.equal(first.totalCount, 27);
    assert.equal(first.data.length, 25);
    assert.deepEqual(Object.keys(first.data[0]).sort(), ['_id', 'description', 'key', 'zone']);
    assert.equal(first.data[0].key, 'KEY_00');
    const second = await t.ok('SecretsRpc.getData', { filter: { zone: 'bulk' }, page: 2 }, as(member.token));
    assert.deepEqual(
      second.data.map((secret: { key: string }) => secret.key),
      ['KEY_25', 'KEY_26'],
    );

    const exactZone = await t.ok('SecretsRpc.getData', { filter: { zone: 'bul' } }, as(member.token));
    assert.equal(exactZone.totalCount, 0, 'zone matches exactly');
    const byKey = await t.ok('SecretsRpc.getData', { filter: { key: 'key_1' }, pageSize: 100 }, as(member.token));
    assert.equal(byKey.totalCount, 10, 'key is a case-insensitive substring');
    const byDescription = await t.ok('SecretsRpc.getData', { filter: { zone: 'bulk', description: 'odd one' } }, as(member.token));
    assert.equal(byDescription.totalCount, 13);
    const wildcard = await t.ok('SecretsRpc.getData', { filter: { key: '%' } }, as(member.token));
    assert.equal(wildcard.totalCount, 0, '% is matched literally');
    const underscore = await t.ok('SecretsRpc.getData', { filter: { key: 'Y_0' } }, as(member.token));
    assert.equal(underscore.totalCount, 10);

    for (const direction of [-1, 'desc']) {
      const sorted = await t.ok('SecretsRpc.getData', { filter: { zone: 'bulk' }, sort: { key: direction }, pageSize: 2 }, as(member.token));
      assert.deepEqual(
        sorted.data.map((secret: { key: string }) => secret.key),
        ['KEY_26', 'KEY_25'],
      );
    }
    const ascending = await t.ok('SecretsRpc.getData', { filter: { zone: 'bulk' }, sort: { key: 'asc' }, pageSize: 1 }, as(member.token));
    assert.equal(ascending.data[0].key, 'KEY_00');

    for (const [params, path] of [
      [{ page: 0 }, 'page'],
      [{ pageSize: 0 }, 'pageSize'],
      [{ page: 1.5 }, 'page'],
      [{ pageSize: -3 }, 'pageSize'],
      [{ sort: { key: 2 } }, 'sort.key'],
      [{ sort: { value: 1 } }, 'sort.value'],
      [{ filter: { value: VALUE } }, 'filter.value'],
    ] as const) {
      const response = await t.call('SecretsRpc.getData', params, as(member.token));
      assert.equal(response.status, 400, JSON.stringify(params));
      assert.equal(response.body.data.issues[0].path, path, JSON.stringify(response.body.data));
      assert.ok(!JSON.stringify(response.body).includes(VALUE));
    }
  });

  it('updates the description and value; an omitted or empty value keeps the stored one', async () => {
    const read = async () => (await t.ok('SecretsRpc.getSecretValue', { zone: 'common', key: 'SENTRY_DSN' }, as(admin.token))).value;
    const described = await t.ok('SecretsRpc.update', { _id: 'common:SENTRY_DSN', description: 'error reporting' }, as(member.token));
    assert.deepEqual(described, { _id: 'common:SENTRY_DSN', zone: 'common', key: 'SENTRY_DSN', description: 'error reporting' });
    assert.equal(await read(), 'https://sentry.example/1');
    await t.ok('SecretsRpc.update', { _id: 'common:SENTRY_DSN', value: '' }, as(member.token));
    assert.equal(await read(), 'https://sentry.example/1');
    await t.ok('SecretsRpc.update', { _id: 'common:SENTRY_DSN', value: 'https://sentry.example/2' }, as(member.token));
    assert.equal(await read(), 'https://sentry.example/2');

    const missing = await t.call('SecretsRpc.update', { _id: 'common:NOPE', value: 'x' }, as(admin.token));
    assert.equal(missing.status, 404);
    const malformed = await t.call('SecretsRpc.update', { _id: 'no-colon', value: 'x' }, as(admin.token));
    assert.equal(malformed.status, 400);
    assert.equal(malformed.body.data.issues[0].path, '_id');
  });

  it('reads values for admins only', async () => {
    const refused = await t.call('SecretsRpc.getSecretValue', { zone: 'production', key: 'STRIPE_KEY' }, as(member.token));
    assert.equal(refused.status, 403);
    assert.equal(refused.body.data.code, 'FORBIDDEN');
    assert.ok(!JSON.stringify(refused.body).includes(VALUE));
    const byKey = await t.call('SecretsRpc.getSecretValue', { zone: 'production', key: 'STRIPE_KEY' }, { apiKey: adminKey.fullKey });
    assert.equal(byKey.body.data.value, VALUE);
    const missing = await t.call('SecretsRpc.getSecretValue', { zone: 'production', key: 'NOPE' }, as(admin.token));
    assert.equal(missing.status, 404);
  });

  it('deletes the definition and the value', async () => {
    await create({ zone: 'staging', key: 'TEMP', value: 'temporary value' });
    assert.deepEqual(await t.ok('SecretsRpc.delete', { _id: 'staging:TEMP' }, as(member.token)), { success: true });
    const [{ count }] = await t.app.deps.db.execute<{ count: string }>(`select count(*) from secrets where zone = 'staging'`);
    assert.equal(Number(count), 0);
    assert.equal((await t.call('SecretsRpc.getSecretValue', { zone: 'staging', key: 'TEMP' }, as(admin.token))).status, 404);
    assert.equal((await t.call('SecretsRpc.delete', { _id: 'staging:TEMP' }, as(member.token))).status, 404);
  });

  it('audits every read and change with who, when and through which credential; admins list it', async () => {
    const log = await t.ok('SecretsRpc.getAuditLog', { filter: { targetId: 'production:STRIPE_KEY' } }, as(admin.token));
    assert.deepEqual(log.data.map((entry: { action: string }) => entry.action).reverse(), ['create', 'read', 'read']);
    const viaKey = log.data.find((entry: { apiKeyId: string | null }) => entry.apiKeyId === adminKey._id);
    assert.ok(viaKey, 'the read made with the API key names it');
    assert.equal(viaKey.sessionId, null);
    assert.equal(viaKey.userId, admin.user._id);
    assert.equal(viaKey.group, 'SecretsRpc');
    assert.ok(Date.parse(viaKey.at) > Date.now() - 60_000);
    const viaSession = log.data.find((entry: { sessionId: string | null }) => entry.sessionId !== null);
    assert.ok(viaSession && viaSession.apiKeyId === null);

    const deletes = await t.ok('SecretsRpc.getAuditLog', { filter: { action: 'delete' } }, as(admin.token));
    assert.deepEqual(
      deletes.data.map((entry: { target: string; userId: string }) => [entry.target, entry.userId]),
      [['staging:TEMP', member.user._id]],
    );
    const paged = await t.ok('SecretsRpc.getAuditLog', { pageSize: 2, page: 2 }, as(admin.token));
    assert.equal(paged.data.length, 2);
    assert.ok(paged.totalCount > 30);
    assert.equal((await t.call('SecretsRpc.getAuditLog', {}, as(member.token))).status, 403);
    assert.ok(!JSON.stringify(log).includes(VALUE));
  });

  it('records each of many reads at once, every entry its own request', async () => {
    const before = (await t.ok('SecretsRpc.getAuditLog', { filter: { action: 'read' }, pageSize: 1 }, as(admin.token))).totalCount;
    const reads = await Promise.all(
      Array.from({ length: 40 }, () => t.ok('SecretsRpc.getSecretValue', { zone: 'production', key: 'STRIPE_KEY' }, as(admin.token))),
    );
    assert.deepEqual(new Set(reads.map((read) => read.value)), new Set([VALUE]));
    const log = await t.ok('SecretsRpc.getAuditLog', { filter: { action: 'read' }, pageSize: 40 }, as(admin.token));
    assert.equal(log.totalCount, before + 40);
    assert.equal(new Set(log.data.map((entry: { requestId: string }) => entry.requestId)).size, 40);
  });

  it('fails closed: no audit record, no value; no audit record, no change', async () => {
    const { db } = t.app.deps;
    await db.execute('alter table core_audit_log rename to core_audit_log_away');
    try {
      // Reads at once share one write of their entries: when it fails, every one of them is refused.
      const reads = await Promise.all(
        Array.from({ length: 8 }, () => t.call('SecretsRpc.getSecretValue', { zone: 'production', key: 'STRIPE_KEY' }, as(admin.token))),
      );
      for (const read of reads) {
        assert.equal(read.body.success, false);
        assert.equal(read.status, 500);
        assert.ok(!JSON.stringify(read.body).includes(VALUE));
      }
      const created = await t.call('SecretsRpc.create', { zone: 'common', key: 'UNAUDITED', value: 'x' }, as(admin.token));
      assert.equal(created.body.success, false);
      const updated = await t.call('SecretsRpc.update', { _id: 'production:STRIPE_KEY', value: 'replaced' }, as(admin.token));
      assert.equal(updated.body.success, false);
    } finally {
      await db.execute('alter table core_audit_log_away rename to core_audit_log');
    }
    const list = await t.ok('SecretsRpc.getData', { filter: { key: 'UNAUDITED' } }, as(admin.token));
    assert.equal(list.totalCount, 0);
    assert.equal((await t.ok('SecretsRpc.getSecretValue', { zone: 'production', key: 'STRIPE_KEY' }, as(admin.token))).value, VALUE);
  });

  it("keeps tenants apart, and a value copied into another tenant's row does not decrypt", async () => {
    const other = await t.signup();
    assert.equal((await t.ok('SecretsRpc.getData', {}, as(other.token))).totalCount, 0);
    for (const [method, params] of [
      ['SecretsRpc.getSecretValue', { zone: 'production', key: 'STRIPE_KEY' }],
      ['SecretsRpc.update', { _id: 'production:STRIPE_KEY', value: 'hijack' }],
      ['SecretsRpc.delete', { _id: 'production:STRIPE_KEY' }],
    ] as const) {
      assert.equal((await t.call(method, params, as(other.token))).status, 404, method);
    }
    assert.equal((await t.ok('SecretsRpc.getAuditLog', {}, as(other.token))).totalCount, 0);

    await t.ok('SecretsRpc.create', { zone: 'production', key: 'STRIPE_KEY', value: 'their own' }, as(other.token));
    const { db } = t.app.deps;
    await db.execute(
      `update secrets set value = (select value from secrets where subscription_id = ? and zone = 'production' and key = 'STRIPE_KEY')
       where subscription_id = ? and zone = 'production' and key = 'STRIPE_KEY'`,
      [admin.subscriptionId, other.subscriptionId],
    );
    const moved = await t.call('SecretsRpc.getSecretValue', { zone: 'production', key: 'STRIPE_KEY' }, as(other.token));
    assert.equal(moved.body.success, false);
    assert.ok(!JSON.stringify(moved.body).includes(VALUE));
  });

  it('never lets a value into events or logs', () => {
    assert.ok(events.length >= 30);
    assert.deepEqual(Object.keys(events[0]!.payload as object).sort(), ['_id', 'action', 'description', 'key', 'zone']);
    assert.ok(events.every((event) => event.subscriptionId));
    const everything = JSON.stringify(events) + t.logs.join('\n');
    for (const value of [VALUE, 'https://sentry.example/2', 'temporary value', 'their own']) assert.ok(!everything.includes(value), value);
  });
});
