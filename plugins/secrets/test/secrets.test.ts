import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import type { BusEvent } from 'rpc-service/plugin';
import type { SecretsRpcCreateParams } from '../../../test/support/caller.ts';
import { refused, shown } from '../../../test/support/caller.ts';
import { startTestApp, type TestApp } from '../../../test/support/harness.ts';
import { addUser, type Member } from '../../../test/support/users.ts';

const VALUE = 'sk_live_51Hx9zQpRd3tVALUEmarker';

describe('SecretsRpc', () => {
  let t: TestApp;
  let admin: Awaited<ReturnType<TestApp['signup']>>;
  let member: Member;
  let adminKey: { _id: string; fullKey: string };
  const events: BusEvent[] = [];

  before(async () => {
    t = await startTestApp({ withNotes: false, plugins: ['secrets', 'api-key'] });
    admin = await t.signup();
    member = await addUser(t, admin.subscriptionId, 'user');
    adminKey = await t.as(admin).ApiKeyRpc.create({ description: 'ops' });
    t.app.deps.bus.subscribe('secret.changed', (event) => void events.push(event));
  });
  after(() => t.close());

  const create = (params: SecretsRpcCreateParams) => t.as(admin).SecretsRpc.create(params);

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
      const error = await refused(t.as(admin).call('SecretsRpc.create', params), 'VALIDATION_ERROR', JSON.stringify(params));
      assert.deepEqual(
        error.issues!.map((issue) => issue.path),
        [path],
      );
    }
    await refused(t.as(admin).SecretsRpc.create({ zone: 'production', key: 'STRIPE_KEY', value: 'other' }), 'CONFLICT');
    const { value } = await t.as(admin).SecretsRpc.getSecretValue({ zone: 'production', key: 'STRIPE_KEY' });
    assert.equal(value, VALUE);
  });

  it('lists definitions with defaults page 1 and pageSize 25, filters and both sort spellings', async () => {
    for (let index = 0; index < 27; index++) {
      await create({ zone: 'bulk', key: `KEY_${String(index).padStart(2, '0')}`, value: `v${index}`, description: index % 2 ? 'Odd ONE' : 'even' });
    }
    const first = await t.as(member).SecretsRpc.getData({ filter: { zone: 'bulk' } });
    assert.equal(first.totalCount, 27);
    assert.equal(first.data.length, 25);
    assert.deepEqual(Object.keys(first.data[0]).sort(), ['_id', 'description', 'key', 'zone']);
    assert.equal(first.data[0].key, 'KEY_00');
    const second = await t.as(member).SecretsRpc.getData({ filter: { zone: 'bulk' }, page: 2 });
    assert.deepEqual(
      second.data.map((secret) => secret.key),
      ['KEY_25', 'KEY_26'],
    );

    const exactZone = await t.as(member).SecretsRpc.getData({ filter: { zone: 'bul' } });
    assert.equal(exactZone.totalCount, 0, 'zone matches exactly');
    const byKey = await t.as(member).SecretsRpc.getData({ filter: { key: 'key_1' }, pageSize: 100 });
    assert.equal(byKey.totalCount, 10, 'key is a case-insensitive substring');
    const byDescription = await t.as(member).SecretsRpc.getData({ filter: { zone: 'bulk', description: 'odd one' } });
    assert.equal(byDescription.totalCount, 13);
    const wildcard = await t.as(member).SecretsRpc.getData({ filter: { key: '%' } });
    assert.equal(wildcard.totalCount, 0, '% is matched literally');
    const underscore = await t.as(member).SecretsRpc.getData({ filter: { key: 'Y_0' } });
    assert.equal(underscore.totalCount, 10);

    for (const direction of [-1, 'desc'] as const) {
      const sorted = await t.as(member).SecretsRpc.getData({ filter: { zone: 'bulk' }, sort: { key: direction }, pageSize: 2 });
      assert.deepEqual(
        sorted.data.map((secret) => secret.key),
        ['KEY_26', 'KEY_25'],
      );
    }
    const ascending = await t.as(member).SecretsRpc.getData({ filter: { zone: 'bulk' }, sort: { key: 'asc' }, pageSize: 1 });
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
      const error = await refused(t.as(member).call('SecretsRpc.getData', params), 'VALIDATION_ERROR', JSON.stringify(params));
      assert.equal(error.issues![0]!.path, path, shown(error));
      assert.ok(!shown(error).includes(VALUE));
    }
  });

  it('updates the description and value; an omitted or empty value keeps the stored one', async () => {
    const read = async () => (await t.as(admin).SecretsRpc.getSecretValue({ zone: 'common', key: 'SENTRY_DSN' })).value;
    const described = await t.as(member).SecretsRpc.update({ _id: 'common:SENTRY_DSN', description: 'error reporting' });
    assert.deepEqual(described, { _id: 'common:SENTRY_DSN', zone: 'common', key: 'SENTRY_DSN', description: 'error reporting' });
    assert.equal(await read(), 'https://sentry.example/1');
    await t.as(member).SecretsRpc.update({ _id: 'common:SENTRY_DSN', value: '' });
    assert.equal(await read(), 'https://sentry.example/1');
    await t.as(member).SecretsRpc.update({ _id: 'common:SENTRY_DSN', value: 'https://sentry.example/2' });
    assert.equal(await read(), 'https://sentry.example/2');

    await refused(t.as(admin).SecretsRpc.update({ _id: 'common:NOPE', value: 'x' }), 'NOT_FOUND');
    const malformed = await refused(t.as(admin).SecretsRpc.update({ _id: 'no-colon', value: 'x' }), 'VALIDATION_ERROR');
    assert.equal(malformed.issues![0]!.path, '_id');
  });

  it('reads values for admins only', async () => {
    const forbidden = await refused(t.as(member).SecretsRpc.getSecretValue({ zone: 'production', key: 'STRIPE_KEY' }), 'FORBIDDEN');
    assert.ok(!shown(forbidden).includes(VALUE));
    const byKey = await t.as({ apiKey: adminKey.fullKey }).SecretsRpc.getSecretValue({ zone: 'production', key: 'STRIPE_KEY' });
    assert.equal(byKey.value, VALUE);
    await refused(t.as(admin).SecretsRpc.getSecretValue({ zone: 'production', key: 'NOPE' }), 'NOT_FOUND');
  });

  it('deletes the definition and the value', async () => {
    await create({ zone: 'staging', key: 'TEMP', value: 'temporary value' });
    assert.deepEqual(await t.as(member).SecretsRpc.delete({ _id: 'staging:TEMP' }), { success: true });
    const [{ count }] = await t.app.deps.db.execute<{ count: string }>(`select count(*) from secrets where zone = 'staging'`);
    assert.equal(Number(count), 0);
    await refused(t.as(admin).SecretsRpc.getSecretValue({ zone: 'staging', key: 'TEMP' }), 'NOT_FOUND');
    await refused(t.as(member).SecretsRpc.delete({ _id: 'staging:TEMP' }), 'NOT_FOUND');
  });

  it('audits every read and change with who, when and through which credential; admins list it', async () => {
    const log = await t.as(admin).SecretsRpc.getAuditLog({ filter: { targetId: 'production:STRIPE_KEY' } });
    assert.deepEqual(log.data.map((entry) => entry.action).reverse(), ['create', 'read', 'read']);
    const viaKey = log.data.find((entry) => entry.apiKeyId === adminKey._id);
    assert.ok(viaKey, 'the read made with the API key names it');
    assert.equal(viaKey.sessionId, null);
    assert.equal(viaKey.userId, admin.user._id);
    assert.equal(viaKey.group, 'SecretsRpc');
    assert.ok(Date.parse(viaKey.at) > Date.now() - 60_000);
    const viaSession = log.data.find((entry) => entry.sessionId !== null);
    assert.ok(viaSession && viaSession.apiKeyId === null);

    const deletes = await t.as(admin).SecretsRpc.getAuditLog({ filter: { action: 'delete' } });
    assert.deepEqual(
      deletes.data.map((entry) => [entry.target, entry.userId]),
      [['staging:TEMP', member.user._id]],
    );
    const paged = await t.as(admin).SecretsRpc.getAuditLog({ pageSize: 2, page: 2 });
    assert.equal(paged.data.length, 2);
    assert.ok(paged.totalCount > 30);
    await refused(t.as(member).SecretsRpc.getAuditLog(), 'FORBIDDEN');
    assert.ok(!JSON.stringify(log).includes(VALUE));
  });

  it('records each of many reads at once, every entry its own request', async () => {
    const before = (await t.as(admin).SecretsRpc.getAuditLog({ filter: { action: 'read' }, pageSize: 1 })).totalCount;
    const reads = await Promise.all(Array.from({ length: 40 }, () => t.as(admin).SecretsRpc.getSecretValue({ zone: 'production', key: 'STRIPE_KEY' })));
    assert.deepEqual(new Set(reads.map((read) => read.value)), new Set([VALUE]));
    const log = await t.as(admin).SecretsRpc.getAuditLog({ filter: { action: 'read' }, pageSize: 40 });
    assert.equal(log.totalCount, before + 40);
    assert.equal(new Set(log.data.map((entry) => entry.requestId)).size, 40);
  });

  it('fails closed: no audit record, no value; no audit record, no change', async () => {
    const { db } = t.app.deps;
    await db.execute('alter table core_audit_log rename to core_audit_log_away');
    try {
      // Reads at once share one write of their entries: when it fails, every one of them is refused.
      const reads = await Promise.all(
        Array.from({ length: 8 }, () => refused(t.as(admin).SecretsRpc.getSecretValue({ zone: 'production', key: 'STRIPE_KEY' }), 'INTERNAL')),
      );
      for (const read of reads) assert.ok(!shown(read).includes(VALUE));
      await refused(t.as(admin).SecretsRpc.create({ zone: 'common', key: 'UNAUDITED', value: 'x' }), 'INTERNAL');
      await refused(t.as(admin).SecretsRpc.update({ _id: 'production:STRIPE_KEY', value: 'replaced' }), 'INTERNAL');
    } finally {
      await db.execute('alter table core_audit_log_away rename to core_audit_log');
    }
    const list = await t.as(admin).SecretsRpc.getData({ filter: { key: 'UNAUDITED' } });
    assert.equal(list.totalCount, 0);
    assert.equal((await t.as(admin).SecretsRpc.getSecretValue({ zone: 'production', key: 'STRIPE_KEY' })).value, VALUE);
  });

  it("keeps tenants apart, and a value copied into another tenant's row does not decrypt", async () => {
    const other = await t.signup();
    assert.equal((await t.as(other).SecretsRpc.getData()).totalCount, 0);
    const theirs = t.as(other).SecretsRpc;
    for (const [method, call] of [
      ['getSecretValue', () => theirs.getSecretValue({ zone: 'production', key: 'STRIPE_KEY' })],
      ['update', () => theirs.update({ _id: 'production:STRIPE_KEY', value: 'hijack' })],
      ['delete', () => theirs.delete({ _id: 'production:STRIPE_KEY' })],
    ] as const) {
      await refused(call(), 'NOT_FOUND', method);
    }
    assert.equal((await t.as(other).SecretsRpc.getAuditLog()).totalCount, 0);

    await t.as(other).SecretsRpc.create({ zone: 'production', key: 'STRIPE_KEY', value: 'their own' });
    const { db } = t.app.deps;
    await db.execute(
      `update secrets set value = (select value from secrets where subscription_id = ? and zone = 'production' and key = 'STRIPE_KEY')
       where subscription_id = ? and zone = 'production' and key = 'STRIPE_KEY'`,
      [admin.subscriptionId, other.subscriptionId],
    );
    const moved = await refused(t.as(other).SecretsRpc.getSecretValue({ zone: 'production', key: 'STRIPE_KEY' }), 'INTERNAL');
    assert.ok(!shown(moved).includes(VALUE));
  });

  it('never lets a value into events or logs', () => {
    assert.ok(events.length >= 30);
    assert.deepEqual(Object.keys(events[0]!.payload as object).sort(), ['_id', 'action', 'description', 'key', 'zone']);
    assert.ok(events.every((event) => event.subscriptionId));
    const everything = JSON.stringify(events) + t.logs.join('\n');
    for (const value of [VALUE, 'https://sentry.example/2', 'temporary value', 'their own']) assert.ok(!everything.includes(value), value);
  });
});
