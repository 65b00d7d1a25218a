import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import type { BusEvent } from 'rpc-service/plugin';
import type { SecretsManagerRpcCreateParams } from '../../../test/support/caller.ts';
import { refused, shown, type Who } from '../../../test/support/caller.ts';
import { startTestApp, type TestApp } from '../../../test/support/harness.ts';
import { addUser, type Member } from '../../../test/support/users.ts';

const VALUE = 'ghp_scopedSECRETmarker0123456789';
const RECORD_FIELDS = ['_id', 'agentName', 'createdAt', 'description', 'key', 'label', 'projectId', 'scope', 'updatedAt'];

describe('SecretsManagerRpc', () => {
  let t: TestApp;
  let admin: Awaited<ReturnType<TestApp['signup']>>;
  let member: Member;
  const events: BusEvent[] = [];
  const create = (params: SecretsManagerRpcCreateParams, who: Who = member) => t.as(who).SecretsManagerRpc.create(params);
  const valueOf = async (_id: string) => (await t.as(admin).SecretsManagerRpc.getSecretValue({ _id })).value;

  before(async () => {
    t = await startTestApp({ withNotes: false, plugins: ['auth', 'secrets-manager', 'secrets'] });
    admin = await t.signup();
    member = await addUser(t, admin.subscriptionId, 'user');
    t.app.deps.bus.subscribe('scopedSecret.changed', (event) => void events.push(event));
  });
  after(() => t.close());

  it('offers the three scopes', async () => {
    assert.deepEqual(await t.as(member).SecretsManagerRpc.getScopeOptions(), [
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
      const error = await refused(t.as(member).call('SecretsManagerRpc.create', params), 'VALIDATION_ERROR', JSON.stringify(params));
      assert.equal(error.issues![0]!.path, path, shown(error));
    }
    const { totalCount } = await t.as(member).SecretsManagerRpc.getData({ pageSize: 200 });
    assert.equal(totalCount, 3);
  });

  it('creates as an upsert: the same place and key keeps its id and takes the new value', async () => {
    const before = await t.as(member).SecretsManagerRpc.getData({ scope: 'project', projectId: 'crm' });
    const again = await create({ scope: 'project', projectId: 'crm', key: 'OPENAI_API_KEY', value: 'rotated project value' });
    assert.equal(again._id, before.data[0]._id);
    assert.equal(await valueOf(again._id), 'rotated project value');
    assert.equal((await t.as(member).SecretsManagerRpc.getData()).totalCount, 3);
  });

  it('updates metadata only without a value, and rotates (or moves) with one', async () => {
    const secret = await create({ scope: 'agent', agentName: 'sales-bot', key: 'CRM_TOKEN', value: 'first token', label: 'CRM' });
    const relabelled = await t.as(member).SecretsManagerRpc.update({ _id: secret._id, label: 'CRM (sales)', value: null });
    assert.equal(relabelled.label, 'CRM (sales)');
    assert.equal(relabelled.description, null);
    assert.equal(await valueOf(secret._id), 'first token');
    await t.as(member).SecretsManagerRpc.update({ _id: secret._id, description: 'read-only token' });
    assert.equal(await valueOf(secret._id), 'first token');

    const rotated = await t.as(member).SecretsManagerRpc.update({ _id: secret._id, value: 'second token' });
    assert.equal(rotated.label, 'CRM (sales)');
    assert.equal(rotated.description, 'read-only token');
    assert.equal(await valueOf(secret._id), 'second token');

    const moved = await t
      .as(member)
      .SecretsManagerRpc.update({ _id: secret._id, scope: 'project', projectId: 'sales', agentName: null, key: 'CRM_TOKEN', value: 'third token' });
    assert.deepEqual([moved._id, moved.scope, moved.projectId, moved.agentName], [secret._id, 'project', 'sales', null]);
    assert.equal(await valueOf(secret._id), 'third token');

    const empty = await refused(t.as(member).SecretsManagerRpc.update({ _id: secret._id, value: '' }), 'VALIDATION_ERROR');
    assert.equal(empty.issues![0]!.path, 'value');
    const noValue = await refused(t.as(member).SecretsManagerRpc.update({ _id: secret._id, key: 'OTHER' }), 'VALIDATION_ERROR');
    assert.equal(noValue.issues![0]!.path, 'value');
    await refused(
      t.as(member).SecretsManagerRpc.update({ _id: secret._id, scope: 'subscription', projectId: null, key: 'OPENAI_API_KEY', value: 'x' }),
      'CONFLICT',
    );
    assert.equal(await valueOf(secret._id), 'third token');
    await refused(t.as(member).SecretsManagerRpc.update({ _id: '00000000-0000-4000-8000-000000000000', label: 'x' }), 'NOT_FOUND');
  });

  it('lists with defaults page 1 and pageSize 50, filtered by scope, project and agent', async () => {
    for (let index = 0; index < 50; index++)
      await create({ scope: 'project', projectId: 'bulk', key: `K${String(index).padStart(2, '0')}`, value: `v${index}` });
    const first = await t.as(member).SecretsManagerRpc.getData();
    assert.equal(first.data.length, 50);
    assert.equal(first.totalCount, 54);
    for (const record of first.data) assert.deepEqual(Object.keys(record).sort(), RECORD_FIELDS);
    const second = await t.as(member).SecretsManagerRpc.getData({ page: 2 });
    assert.equal(second.data.length, 4);
    assert.equal((await t.as(member).SecretsManagerRpc.getData({ projectId: 'bulk', pageSize: 10 })).totalCount, 50);
    assert.equal((await t.as(member).SecretsManagerRpc.getData({ scope: 'agent' })).totalCount, 1);
    assert.equal((await t.as(member).SecretsManagerRpc.getData({ agentName: 'support-bot' })).totalCount, 1);
    assert.equal((await t.as(member).SecretsManagerRpc.getData({ scope: 'subscription', projectId: null, agentName: null })).totalCount, 1);
    for (const params of [{ page: 0 }, { pageSize: 0 }, { pageSize: 2.5 }, { scope: 'team' }]) {
      await refused(t.as(member).call('SecretsManagerRpc.getData', params), 'VALIDATION_ERROR', JSON.stringify(params));
    }
  });

  it('reads values for admins only, each read audited with its credential', async () => {
    const [secret] = (await t.as(member).SecretsManagerRpc.getData({ scope: 'subscription' })).data;
    await refused(t.as(member).SecretsManagerRpc.getSecretValue({ _id: secret._id }), 'FORBIDDEN');
    const log = await t.as(admin).SecretsRpc.getAuditLog({ filter: { targetId: secret._id } });
    assert.deepEqual(log.data.map((entry) => entry.action).reverse(), ['create', 'read']);
    assert.equal(log.data[0].group, 'SecretsManagerRpc');
    assert.equal(log.data[0].target, 'subscription/OPENAI_API_KEY');
    assert.equal(log.data[0].userId, admin.user._id);
    assert.ok(log.data[0].sessionId);
    assert.equal(log.data[1].userId, member.user._id);
  });

  it('deletes a secret and its value', async () => {
    const secret = await create({ scope: 'subscription', key: 'TO_DELETE', value: 'bye' });
    assert.deepEqual(await t.as(member).SecretsManagerRpc.delete({ _id: secret._id }), { success: true });
    await refused(t.as(admin).SecretsManagerRpc.getSecretValue({ _id: secret._id }), 'NOT_FOUND');
    await refused(t.as(member).SecretsManagerRpc.delete({ _id: secret._id }), 'NOT_FOUND');
    const log = await t.as(admin).SecretsRpc.getAuditLog({ filter: { targetId: secret._id, action: 'delete' } });
    assert.equal(log.totalCount, 1);
  });

  it("keeps tenants apart, and a value copied into another tenant's row does not decrypt", async () => {
    const other = await t.signup();
    const [secret] = (await t.as(member).SecretsManagerRpc.getData({ scope: 'subscription' })).data;
    assert.equal((await t.as(other).SecretsManagerRpc.getData()).totalCount, 0);
    const others = t.as(other).SecretsManagerRpc;
    for (const [method, call] of [
      ['getSecretValue', () => others.getSecretValue({ _id: secret._id })],
      ['update', () => others.update({ _id: secret._id, value: 'hijack' })],
      ['update', () => others.update({ _id: secret._id, label: 'hijack' })],
      ['delete', () => others.delete({ _id: secret._id })],
    ] as const) {
      await refused(call(), 'NOT_FOUND', method);
    }
    const theirs = await create({ scope: 'subscription', key: 'OPENAI_API_KEY', value: 'their own' }, other);
    assert.notEqual(theirs._id, secret._id);
    await t.app.deps.db.execute('update secrets_manager_secret set value = (select value from secrets_manager_secret where id = ?) where id = ?', [
      secret._id,
      theirs._id,
    ]);
    const moved = await refused(t.as(other).SecretsManagerRpc.getSecretValue({ _id: theirs._id }), 'INTERNAL');
    assert.ok(!shown(moved).includes(VALUE));
    assert.equal(await valueOf(secret._id), VALUE);
  });

  it('never lets a value into events or logs', () => {
    assert.ok(events.length > 50);
    assert.deepEqual(Object.keys(events[0]!.payload as object).sort(), ['action', ...RECORD_FIELDS].sort());
    const everything = JSON.stringify(events) + t.logs.join('\n');
    for (const value of [VALUE, 'agent value', 'third token', 'their own']) assert.ok(!everything.includes(value), value);
  });
});
