import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import type { BusEvent } from 'rpc-service/plugin';
import { startTestApp, type TestApp } from '../../../test/support/harness.ts';
import { addUser } from '../../../test/support/users.ts';

const VALUE = 'ghp_scopedSECRETmarker0123456789';
const RECORD_FIELDS = ['_id', 'agentName', 'createdAt', 'description', 'key', 'label', 'projectId', 'scope', 'updatedAt'];

describe('SecretsManagerRpc', () => {
  let t: TestApp;
  let admin: Awaited<ReturnType<TestApp['signup']>>;
  let member: Awaited<ReturnType<typeof addUser>>;
  const events: BusEvent[] = [];
  const as = (token: string) => ({ token });
  const create = (params: Record<string, unknown>, token = member.token) => t.ok('SecretsManagerRpc.create', params, as(token));
  const valueOf = async (_id: string) => (await t.ok('SecretsManagerRpc.getSecretValue', { _id }, as(admin.token))).value;

  before(async () => {
    t = await startTestApp({ withNotes: false, plugins: ['auth', 'secrets-manager', 'secrets'] });
    admin = await t.signup();
    member = await addUser(t, admin.subscriptionId, 'user');
    t.app.deps.bus.subscribe('scopedSecret.changed', (event) => void events.push(event));
  });
  after(() => t.close());

  it('offers the three scopes', async () => {
    assert.deepEqual(await t.ok('SecretsManagerRpc.getScopeOptions', {}, as(member.token)), [
      { value: 'subscription', label: 'Subscription' },
      { value: 'project', label: 'Project' },
      { value: 'agent', label: 'Agent' },
    ]);
  });

  it('creates secrets of the subscription, a project and an agent, metadata only in the result', async () => {
    const subscription = await create({ scope: 'subscription', key: 'OPENAI_API_KEY', value: VALUE, label: 'OpenAI' });
    assert.deepEqual(Object.keys(subscription).sort(), RECORD_FIELDS);
    assert.equal(subscription.scope, 'subscription');
    assert.equal(subscription.projectId, null);
    assert.equal(subscription.agentName, null);
    assert.equal(subscription.label, 'OpenAI');
    assert.equal(subscription.description, null);
    const project = await create({ scope: 'project', projectId: 'crm', key: 'OPENAI_API_KEY', value: 'project value' });
    const agent = await create({ scope: 'agent', agentName: 'support-bot', key: 'OPENAI_API_KEY', value: 'agent value', description: 'for the bot' });
    assert.equal(new Set([subscription._id, project._id, agent._id]).size, 3);
    assert.equal(await valueOf(subscription._id), VALUE);
    assert.equal(await valueOf(agent._id), 'agent value');
    const [row] = await t.app.deps.db.execute<{ value: string }>('select value from secrets_manager_secret where id = ?', [subscription._id]);
    assert.ok(row!.value.startsWith('k1.') && !row!.value.includes(VALUE));
  });

  it('refuses a place that does not fit its scope, empty keys and values, unknown scopes', async () => {
    for (const [params, path] of [
      [{ scope: 'project', key: 'K', value: 'v' }, 'projectId'],
      [{ scope: 'agent', key: 'K', value: 'v' }, 'agentName'],
      [{ scope: 'subscription', agentName: 'bot', key: 'K', value: 'v' }, 'agentName'],
      [{ scope: 'subscription', projectId: 'crm', key: 'K', value: 'v' }, 'projectId'],
      [{ scope: 'subscription', key: '', value: 'v' }, 'key'],
      [{ scope: 'subscription', key: 'K', value: '' }, 'value'],
      [{ scope: 'team', key: 'K', value: 'v' }, 'scope'],
    ] as const) {
      const response = await t.call('SecretsManagerRpc.create', params, as(member.token));
      assert.equal(response.status, 400, JSON.stringify(params));
      assert.equal(response.body.data.issues[0].path, path, JSON.stringify(response.body.data));
    }
    const { totalCount } = await t.ok('SecretsManagerRpc.getData', { pageSize: 200 }, as(member.token));
    assert.equal(totalCount, 3);
  });

  it('creates as an upsert: the same place and key keeps its id and takes the new value', async () => {
    const before = await t.ok('SecretsManagerRpc.getData', { scope: 'project', projectId: 'crm' }, as(member.token));
    const again = await create({ scope: 'project', projectId: 'crm', key: 'OPENAI_API_KEY', value: 'rotated project value' });
    assert.equal(again._id, before.data[0]._id);
    assert.equal(await valueOf(again._id), 'rotated project value');
    assert.equal((await t.ok('SecretsManagerRpc.getData', {}, as(member.token))).totalCount, 3);
  });

  it('updates metadata only without a value, and rotates (or moves) with one', async () => {
    const secret = await create({ scope: 'agent', agentName: 'sales-bot', key: 'CRM_TOKEN', value: 'first token', label: 'CRM' });
    const relabelled = await t.ok('SecretsManagerRpc.update', { _id: secret._id, label: 'CRM (sales)', value: null }, as(member.token));
    assert.equal(relabelled.label, 'CRM (sales)');
    assert.equal(relabelled.description, null);
    assert.equal(await valueOf(secret._id), 'first token');
    await t.ok('SecretsManagerRpc.update', { _id: secret._id, description: 'read-only token' }, as(member.token));
    assert.equal(await valueOf(secret._id), 'first token');

    const rotated = await t.ok('SecretsManagerRpc.update', { _id: secret._id, value: 'second token' }, as(member.token));
    assert.equal(rotated.label, 'CRM (sales)');
    assert.equal(rotated.description, 'read-only token');
    assert.equal(await valueOf(secret._id), 'second token');

    const moved = await t.ok(
      'SecretsManagerRpc.update',
      { _id: secret._id, scope: 'project', projectId: 'sales', agentName: null, key: 'CRM_TOKEN', value: 'third token' },
      as(member.token),
    );
    assert.deepEqual([moved._id, moved.scope, moved.projectId, moved.agentName], [secret._id, 'project', 'sales', null]);
    assert.equal(await valueOf(secret._id), 'third token');

    const empty = await t.call('SecretsManagerRpc.update', { _id: secret._id, value: '' }, as(member.token));
    assert.equal(empty.status, 400);
    assert.equal(empty.body.data.issues[0].path, 'value');
    const noValue = await t.call('SecretsManagerRpc.update', { _id: secret._id, key: 'OTHER' }, as(member.token));
    assert.equal(noValue.status, 400);
    assert.equal(noValue.body.data.issues[0].path, 'value');
    const taken = await t.call(
      'SecretsManagerRpc.update',
      { _id: secret._id, scope: 'subscription', projectId: null, key: 'OPENAI_API_KEY', value: 'x' },
      as(member.token),
    );
    assert.equal(taken.status, 409);
    assert.equal(await valueOf(secret._id), 'third token');
    assert.equal((await t.call('SecretsManagerRpc.update', { _id: '00000000-0000-4000-8000-000000000000', label: 'x' }, as(member.token))).status, 404);
  });

  it('lists with defaults page 1 and pageSize 50, filtered by scope, project and agent', async () => {
    for (let index = 0; index < 50; index++)
      await create({ scope: 'project', projectId: 'bulk', key: `K${String(index).padStart(2, '0')}`, value: `v${index}` });
    const first = await t.ok('SecretsManagerRpc.getData', {}, as(member.token));
    assert.equal(first.data.length, 50);
    assert.equal(first.totalCount, 54);
    for (const record of first.data) assert.deepEqual(Object.keys(record).sort(), RECORD_FIELDS);
    const second = await t.ok('SecretsManagerRpc.getData', { page: 2 }, as(member.token));
    assert.equal(second.data.length, 4);
    assert.equal((await t.ok('SecretsManagerRpc.getData', { projectId: 'bulk', pageSize: 10 }, as(member.token))).totalCount, 50);
    assert.equal((await t.ok('SecretsManagerRpc.getData', { scope: 'agent' }, as(member.token))).totalCount, 1);
    assert.equal((await t.ok('SecretsManagerRpc.getData', { agentName: 'support-bot' }, as(member.token))).totalCount, 1);
    assert.equal((await t.ok('SecretsManagerRpc.getData', { scope: 'subscription', projectId: null, agentName: null }, as(member.token))).totalCount, 1);
    for (const params of [{ page: 0 }, { pageSize: 0 }, { pageSize: 2.5 }, { scope: 'team' }]) {
      assert.equal((await t.call('SecretsManagerRpc.getData', params, as(member.token))).status, 400, JSON.stringify(params));
    }
  });

  it('reads values for admins only, each read audited with its credential', async () => {
    const [secret] = (await t.ok('SecretsManagerRpc.getData', { scope: 'subscription' }, as(member.token))).data;
    const refused = await t.call('SecretsManagerRpc.getSecretValue', { _id: secret._id }, as(member.token));
    assert.equal(refused.status, 403);
    const log = await t.ok('SecretsRpc.getAuditLog', { filter: { targetId: secret._id } }, as(admin.token));
    assert.deepEqual(log.data.map((entry: { action: string }) => entry.action).reverse(), ['create', 'read']);
    assert.equal(log.data[0].group, 'SecretsManagerRpc');
    assert.equal(log.data[0].target, 'subscription/OPENAI_API_KEY');
    assert.equal(log.data[0].userId, admin.user._id);
    assert.ok(log.data[0].sessionId);
    assert.equal(log.data[1].userId, member.user._id);
  });

  it('deletes a secret and its value', async () => {
    const secret = await create({ scope: 'subscription', key: 'TO_DELETE', value: 'bye' });
    assert.deepEqual(await t.ok('SecretsManagerRpc.delete', { _id: secret._id }, as(member.token)), { success: true });
    assert.equal((await t.call('SecretsManagerRpc.getSecretValue', { _id: secret._id }, as(admin.token))).status, 404);
    assert.equal((await t.call('SecretsManagerRpc.delete', { _id: secret._id }, as(member.token))).status, 404);
    const log = await t.ok('SecretsRpc.getAuditLog', { filter: { targetId: secret._id, action: 'delete' } }, as(admin.token));
    assert.equal(log.totalCount, 1);
  });

  it("keeps tenants apart, and a value copied into another tenant's row does not decrypt", async () => {
    const other = await t.signup();
    const [secret] = (await t.ok('SecretsManagerRpc.getData', { scope: 'subscription' }, as(member.token))).data;
    assert.equal((await t.ok('SecretsManagerRpc.getData', {}, as(other.token))).totalCount, 0);
    for (const [method, params] of [
      ['SecretsManagerRpc.getSecretValue', { _id: secret._id }],
      ['SecretsManagerRpc.update', { _id: secret._id, value: 'hijack' }],
      ['SecretsManagerRpc.update', { _id: secret._id, label: 'hijack' }],
      ['SecretsManagerRpc.delete', { _id: secret._id }],
    ] as const) {
      assert.equal((await t.call(method, params, as(other.token))).status, 404, method);
    }
    const theirs = await create({ scope: 'subscription', key: 'OPENAI_API_KEY', value: 'their own' }, other.token);
    assert.notEqual(theirs._id, secret._id);
    await t.app.deps.db.execute('update secrets_manager_secret set value = (select value from secrets_manager_secret where id = ?) where id = ?', [
      secret._id,
      theirs._id,
    ]);
    const moved = await t.call('SecretsManagerRpc.getSecretValue', { _id: theirs._id }, as(other.token));
    assert.equal(moved.body.success, false);
    assert.ok(!JSON.stringify(moved.body).includes(VALUE));
    assert.equal(await valueOf(secret._id), VALUE);
  });

  it('never lets a value into events or logs', () => {
    assert.ok(events.length > 50);
    assert.deepEqual(Object.keys(events[0]!.payload as object).sort(), ['action', ...RECORD_FIELDS].sort());
    const everything = JSON.stringify(events) + t.logs.join('\n');
    for (const value of [VALUE, 'agent value', 'third token', 'their own']) assert.ok(!everything.includes(value), value);
  });
});
