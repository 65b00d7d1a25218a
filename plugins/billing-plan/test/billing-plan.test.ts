import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { refused } from '../../../test/support/caller.ts';
import { startTestApp, type TestApp } from '../../../test/support/harness.ts';
import { signupTeam, type Team } from '../../../test/support/users.ts';

const list = { filter: {}, sort: {}, page: 1, pageSize: 25 };

describe('BillingPlanRpc', () => {
  let t: TestApp;
  let admin: Team['admin'];
  let staff: Team['staff'];
  let member: Team['member'];
  let stranger: Team['stranger'];

  before(async () => {
    t = await startTestApp({ withNotes: false, plugins: ['auth', 'billing-plan'] });
    ({ admin, staff, member, stranger } = await signupTeam(t));
  });
  after(() => t.close());

  it('creates a plan with its defaults, and refuses what a plan cannot be', async () => {
    const plan = await t.as(staff).BillingPlanRpc.create({ planId: 'starter', name: '  Starter ', currency: 'eur', recurringCost: 900 });
    assert.match(plan._id, /^[0-9a-f-]{36}$/);
    const { _id, createdAt, updatedAt, ...fields } = plan;
    assert.deepEqual(fields, {
      planId: 'starter',
      name: 'Starter',
      description: '',
      currency: 'EUR',
      oneTimeCost: 0,
      recurringCost: 900,
      billingCycle: 'monthly',
      trialDays: 0,
      features: [],
      basePlanId: null,
      isPublic: false,
      isArchived: false,
      sortOrder: 0,
    });
    assert.equal(createdAt, updatedAt);
    for (const [params, path] of [
      [{ planId: 'x1', name: 'X', currency: 'EURO' }, 'currency'],
      [{ planId: 'x1', name: 'X', currency: 'XYZ' }, 'currency'],
      [{ planId: 'x1', name: 'X', currency: 'USD', recurringCost: -1 }, 'recurringCost'],
      [{ planId: 'x1', name: 'X', currency: 'USD', recurringCost: 9.99 }, 'recurringCost'],
      [{ planId: 'x1', name: 'X', currency: 'USD', billingCycle: 'one_time', recurringCost: 100 }, 'recurringCost'],
      [{ planId: 'x1', name: 'X', currency: 'USD', billingCycle: 'daily' }, 'billingCycle'],
      [{ planId: 'Bad Id', name: 'X', currency: 'USD' }, 'planId'],
      [{ planId: 'x1', name: ' ', currency: 'USD' }, 'name'],
      [{ planId: 'x1', name: 'X', currency: 'USD', features: [{ key: 'seats' }, { key: 'seats', limit: 3 }] }, 'features'],
      [{ planId: 'x1', name: 'X', currency: 'USD', basePlanId: 'nope' }, 'basePlanId'],
    ] as const) {
      const error = await refused(t.as(admin).call('BillingPlanRpc.create', params), 'VALIDATION_ERROR', JSON.stringify(params));
      assert.ok(
        error.issues?.some((issue) => issue.path === path),
        `${JSON.stringify(params)}: ${JSON.stringify(error.issues)}`,
      );
    }
    await refused(t.as(admin).BillingPlanRpc.create({ planId: 'starter', name: 'Again', currency: 'EUR' }), 'CONFLICT');
    await refused(t.as(member).BillingPlanRpc.create({ planId: 'mine', name: 'Mine', currency: 'EUR' }), 'FORBIDDEN');
    assert.equal((await t.as(member).BillingPlanRpc.getData({ ...list, filter: { planId: 'x1' } })).totalDocs, 0, 'nothing was written by the refused calls');
  });

  it('updates a plan in part, keeps its planId, and archives it on delete: readable by id, gone from the public list', async () => {
    const plan = await t.as(admin).BillingPlanRpc.create({ planId: 'team', name: 'Team', currency: 'USD', recurringCost: 4900, isPublic: true, sortOrder: 2 });
    const changed = await t.as(staff).BillingPlanRpc.update({ _id: plan._id, description: 'For teams', trialDays: 14 });
    assert.deepEqual([changed.description, changed.trialDays, changed.recurringCost, changed.name], ['For teams', 14, 4900, 'Team']);
    assert.ok(changed.updatedAt >= plan.updatedAt);
    await refused(t.as(admin).BillingPlanRpc.update({ _id: plan._id, planId: 'renamed' }), 'VALIDATION_ERROR');
    await refused(t.as(admin).BillingPlanRpc.update({ _id: plan._id, billingCycle: 'one_time' }), 'VALIDATION_ERROR', 'the merged plan is checked');
    await refused(t.as(member).BillingPlanRpc.update({ _id: plan._id, name: 'Mine' }), 'FORBIDDEN');

    await t.as(admin).BillingPlanRpc.create({ planId: 'hidden', name: 'Hidden', currency: 'USD' });
    await t.as(admin).BillingPlanRpc.create({
      planId: 'solo',
      name: 'Solo',
      currency: 'USD',
      recurringCost: 900,
      isPublic: true,
      sortOrder: 1,
      features: [{ key: 'seats', limit: 1 }],
    });
    const visible = await t.as(member).BillingPlanRpc.listPublicPlans({});
    assert.deepEqual(visible, [
      { planId: 'solo', name: 'Solo', description: '', currency: 'USD', oneTimeCost: 0, recurringCost: 900, billingCycle: 'monthly' },
      { planId: 'team', name: 'Team', description: 'For teams', currency: 'USD', oneTimeCost: 0, recurringCost: 4900, billingCycle: 'monthly' },
    ]);

    assert.deepEqual(await t.as(admin).BillingPlanRpc.delete({ _id: plan._id }), { success: true, message: 'Plan team archived' });
    const archived = await t.as(member).BillingPlanRpc.findById({ _id: plan._id });
    assert.deepEqual([archived.isArchived, archived.planId], [true, 'team']);
    assert.deepEqual(
      (await t.as(member).BillingPlanRpc.listPublicPlans({})).map((p) => p.planId),
      ['solo'],
    );
    assert.equal((await t.as(member).BillingPlanRpc.getData({ ...list, filter: { planId: 'team' } })).totalDocs, 1, 'archived, not removed');
    assert.equal((await t.as(admin).BillingPlanRpc.delete({ _id: plan._id })).message, 'Plan team was already archived');
  });

  it('pages getData with skip = (page - 1) * pageSize, requires its four params, and filters and sorts', async () => {
    for (let index = 1; index <= 7; index++) {
      await t.as(admin).BillingPlanRpc.create({ planId: `tier-${index}`, name: `Tier ${index}`, currency: 'GBP', recurringCost: index * 1000 });
    }
    const query = { filter: { currency: 'GBP' }, sort: { recurringCost: -1 as const } };
    const third = await t.as(member).BillingPlanRpc.getData({ ...query, page: 3, pageSize: 3 });
    assert.deepEqual(
      { ...third, docs: third.docs.map((plan) => plan.planId) },
      { docs: ['tier-1'], totalDocs: 7, limit: 3, page: 3, totalPages: 3, hasNextPage: false, hasPrevPage: true },
    );
    assert.deepEqual(
      (await t.as(member).BillingPlanRpc.getData({ ...query, page: 2, pageSize: 3 })).docs.map((plan) => plan.planId),
      ['tier-4', 'tier-3', 'tier-2'],
    );
    assert.deepEqual((await t.as(member).BillingPlanRpc.getData({ ...query, page: 4, pageSize: 3 })).docs, []);
    assert.equal(
      (await t.as(member).BillingPlanRpc.getData({ filter: { recurringCost: { $gte: 5000 }, currency: 'GBP' }, sort: {}, page: 1, pageSize: 10 })).totalDocs,
      3,
    );
    for (const missing of ['filter', 'sort', 'page', 'pageSize'] as const) {
      const { [missing]: _left, ...params } = { ...query, page: 1, pageSize: 3 };
      await refused(t.as(member).call('BillingPlanRpc.getData', params), 'VALIDATION_ERROR', missing);
    }
    await refused(t.as(member).BillingPlanRpc.getData({ ...query, page: 0, pageSize: 3 }), 'VALIDATION_ERROR');
    await refused(t.as(member).BillingPlanRpc.getData({ ...list, filter: { price: 3 } }), 'VALIDATION_ERROR');
  });

  it('resolves features through base plans, and refuses a loop', async () => {
    const base = await t
      .as(admin)
      .BillingPlanRpc.create({ planId: 'base', name: 'Base', currency: 'USD', features: [{ key: 'seats', name: 'Seats', limit: 3 }, { key: 'support' }] });
    const pro = await t.as(admin).BillingPlanRpc.create({
      planId: 'pro',
      name: 'Pro',
      currency: 'USD',
      basePlanId: 'base',
      features: [
        { key: 'seats', limit: 25 },
        { key: 'api.calls', limit: 100000 },
      ],
    });
    assert.deepEqual((await t.as(member).BillingPlanRpc.findById({ _id: pro._id })).features, [
      { key: 'seats', name: null, limit: 25 },
      { key: 'api.calls', name: null, limit: 100000 },
    ]);
    assert.deepEqual((await t.as(member).BillingPlanRpc.findById({ _id: pro._id, resolveFeatures: true })).features, [
      { key: 'seats', name: null, limit: 25, fromPlanId: 'pro' },
      { key: 'api.calls', name: null, limit: 100000, fromPlanId: 'pro' },
      { key: 'support', name: null, limit: null, fromPlanId: 'base' },
    ]);
    const resolved = await t.as(member).BillingPlanRpc.getData({ filter: { planId: 'pro' }, sort: {}, page: 1, pageSize: 5, resolveFeatures: true });
    assert.equal(resolved.docs[0].features.length, 3);
    const loop = await refused(t.as(admin).BillingPlanRpc.update({ _id: base._id, basePlanId: 'pro' }), 'VALIDATION_ERROR');
    assert.match(loop.issues?.[0]?.message ?? '', /loop/);
    assert.deepEqual(
      await t.as(member).BillingPlanRpc.getFieldValues({
        fieldName: 'plan',
        reference: { valueField: 'planId', displayField: 'name', filter: { planId: { $in: ['base', 'pro'] } } },
      }),
      [
        { value: 'base', label: 'Base' },
        { value: 'pro', label: 'Pro' },
      ],
    );
  });

  it('keeps plans to their subscription', async () => {
    const plan = (await t.as(admin).BillingPlanRpc.getData({ ...list, filter: { planId: 'solo' } })).docs[0];
    const theirs = t.as(stranger).BillingPlanRpc;
    for (const [method, call] of [
      ['BillingPlanRpc.findById', () => theirs.findById({ _id: plan._id })],
      ['BillingPlanRpc.update', () => theirs.update({ _id: plan._id, name: 'Taken' })],
      ['BillingPlanRpc.delete', () => theirs.delete({ _id: plan._id })],
    ] as const) {
      await refused(call(), 'NOT_FOUND', method);
    }
    assert.deepEqual(await t.as(stranger).BillingPlanRpc.listPublicPlans({}), []);
    assert.equal((await t.as(stranger).BillingPlanRpc.getData(list)).totalDocs, 0);
    // The same planId is free in another subscription.
    await t.as(stranger).BillingPlanRpc.create({ planId: 'solo', name: 'Their solo', currency: 'USD' });
    assert.equal((await t.as(admin).BillingPlanRpc.findById({ _id: plan._id })).name, 'Solo');
  });
});
