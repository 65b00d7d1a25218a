import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { startTestApp, type TestApp } from '../support/harness.ts';
import { addUser } from '../support/users.ts';

type Session = { token: string };
const as = (session: Session) => ({ token: session.token });
const list = { filter: {}, sort: {}, page: 1, pageSize: 25 };

describe('BillingPlanRpc and DiscountRpc', () => {
  let t: TestApp;
  let admin: Awaited<ReturnType<TestApp['signup']>>;
  let staff: Awaited<ReturnType<typeof addUser>>;
  let member: Awaited<ReturnType<typeof addUser>>;
  let stranger: Awaited<ReturnType<TestApp['signup']>>;
  const code = (response: { body: { data: { code?: string } } }) => response.body.data.code;

  before(async () => {
    t = await startTestApp({ withNotes: false, plugins: ['auth', 'billing-plan', 'discount'] });
    admin = await t.signup();
    staff = await addUser(t, admin.subscriptionId, 'staff');
    member = await addUser(t, admin.subscriptionId, 'user');
    stranger = await t.signup();
  });
  after(() => t.close());

  it('creates a plan with its defaults, and refuses what a plan cannot be', async () => {
    const plan = await t.ok('BillingPlanRpc.create', { planId: 'starter', name: '  Starter ', currency: 'eur', recurringCost: 900 }, as(staff));
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
      const response = await t.call('BillingPlanRpc.create', params, as(admin));
      assert.equal(code(response), 'VALIDATION_ERROR', JSON.stringify(params));
      assert.ok(response.body.data.issues.some((issue: { path: string }) => issue.path === path), `${JSON.stringify(params)}: ${JSON.stringify(response.body.data.issues)}`);
    }
    assert.equal(code(await t.call('BillingPlanRpc.create', { planId: 'starter', name: 'Again', currency: 'EUR' }, as(admin))), 'CONFLICT');
    assert.equal(code(await t.call('BillingPlanRpc.create', { planId: 'mine', name: 'Mine', currency: 'EUR' }, as(member))), 'FORBIDDEN');
    assert.equal((await t.ok('BillingPlanRpc.getData', { ...list, filter: { planId: 'x1' } }, as(member))).totalDocs, 0, 'nothing was written by the refused calls');
  });

  it('updates a plan in part, keeps its planId, and archives it on delete: readable by id, gone from the public list', async () => {
    const plan = await t.ok('BillingPlanRpc.create', { planId: 'team', name: 'Team', currency: 'USD', recurringCost: 4900, isPublic: true, sortOrder: 2 }, as(admin));
    const changed = await t.ok('BillingPlanRpc.update', { _id: plan._id, description: 'For teams', trialDays: 14 }, as(staff));
    assert.deepEqual([changed.description, changed.trialDays, changed.recurringCost, changed.name], ['For teams', 14, 4900, 'Team']);
    assert.ok(changed.updatedAt >= plan.updatedAt);
    assert.equal(code(await t.call('BillingPlanRpc.update', { _id: plan._id, planId: 'renamed' }, as(admin))), 'VALIDATION_ERROR');
    assert.equal(code(await t.call('BillingPlanRpc.update', { _id: plan._id, billingCycle: 'one_time' }, as(admin))), 'VALIDATION_ERROR', 'the merged plan is checked');
    assert.equal(code(await t.call('BillingPlanRpc.update', { _id: plan._id, name: 'Mine' }, as(member))), 'FORBIDDEN');

    await t.ok('BillingPlanRpc.create', { planId: 'hidden', name: 'Hidden', currency: 'USD' }, as(admin));
    await t.ok('BillingPlanRpc.create', { planId: 'solo', name: 'Solo', currency: 'USD', recurringCost: 900, isPublic: true, sortOrder: 1, features: [{ key: 'seats', limit: 1 }] }, as(admin));
    const visible = await t.ok('BillingPlanRpc.listPublicPlans', {}, as(member));
    assert.deepEqual(visible, [
      { planId: 'solo', name: 'Solo', description: '', currency: 'USD', oneTimeCost: 0, recurringCost: 900, billingCycle: 'monthly' },
      { planId: 'team', name: 'Team', description: 'For teams', currency: 'USD', oneTimeCost: 0, recurringCost: 4900, billingCycle: 'monthly' },
    ]);

    assert.deepEqual(await t.ok('BillingPlanRpc.delete', { _id: plan._id }, as(admin)), { success: true, message: 'Plan team archived' });
    const archived = await t.ok('BillingPlanRpc.findById', { _id: plan._id }, as(member));
    assert.deepEqual([archived.isArchived, archived.planId], [true, 'team']);
    assert.deepEqual((await t.ok('BillingPlanRpc.listPublicPlans', {}, as(member))).map((p: { planId: string }) => p.planId), ['solo']);
    assert.equal((await t.ok('BillingPlanRpc.getData', { ...list, filter: { planId: 'team' } }, as(member))).totalDocs, 1, 'archived, not removed');
    assert.equal((await t.ok('BillingPlanRpc.delete', { _id: plan._id }, as(admin))).message, 'Plan team was already archived');
  });

  it('pages getData with skip = (page - 1) * pageSize, requires its four params, and filters and sorts', async () => {
    for (let index = 1; index <= 7; index++) {
      await t.ok('BillingPlanRpc.create', { planId: `tier-${index}`, name: `Tier ${index}`, currency: 'GBP', recurringCost: index * 1000 }, as(admin));
    }
    const query = { filter: { currency: 'GBP' }, sort: { recurringCost: -1 } };
    const third = await t.ok('BillingPlanRpc.getData', { ...query, page: 3, pageSize: 3 }, as(member));
    assert.deepEqual(
      { ...third, docs: third.docs.map((plan: { planId: string }) => plan.planId) },
      { docs: ['tier-1'], totalDocs: 7, limit: 3, page: 3, totalPages: 3, hasNextPage: false, hasPrevPage: true },
    );
    assert.deepEqual((await t.ok('BillingPlanRpc.getData', { ...query, page: 2, pageSize: 3 }, as(member))).docs.map((plan: { planId: string }) => plan.planId), ['tier-4', 'tier-3', 'tier-2']);
    assert.deepEqual((await t.ok('BillingPlanRpc.getData', { ...query, page: 4, pageSize: 3 }, as(member))).docs, []);
    assert.equal((await t.ok('BillingPlanRpc.getData', { filter: { recurringCost: { $gte: 5000 }, currency: 'GBP' }, sort: {}, page: 1, pageSize: 10 }, as(member))).totalDocs, 3);
    for (const missing of ['filter', 'sort', 'page', 'pageSize'] as const) {
      const { [missing]: _left, ...params } = { ...query, page: 1, pageSize: 3 };
      assert.equal(code(await t.call('BillingPlanRpc.getData', params, as(member))), 'VALIDATION_ERROR', missing);
    }
    assert.equal(code(await t.call('BillingPlanRpc.getData', { ...query, page: 0, pageSize: 3 }, as(member))), 'VALIDATION_ERROR');
    assert.equal(code(await t.call('BillingPlanRpc.getData', { ...list, filter: { price: 3 } }, as(member))), 'VALIDATION_ERROR');
  });

  it('resolves features through base plans, and refuses a loop', async () => {
    const base = await t.ok('BillingPlanRpc.create', { planId: 'base', name: 'Base', currency: 'USD', features: [{ key: 'seats', name: 'Seats', limit: 3 }, { key: 'support' }] }, as(admin));
    const pro = await t.ok('BillingPlanRpc.create', { planId: 'pro', name: 'Pro', currency: 'USD', basePlanId: 'base', features: [{ key: 'seats', limit: 25 }, { key: 'api.calls', limit: 100000 }] }, as(admin));
    assert.deepEqual((await t.ok('BillingPlanRpc.findById', { _id: pro._id }, as(member))).features, [
      { key: 'seats', name: null, limit: 25 },
      { key: 'api.calls', name: null, limit: 100000 },
    ]);
    assert.deepEqual((await t.ok('BillingPlanRpc.findById', { _id: pro._id, resolveFeatures: true }, as(member))).features, [
      { key: 'seats', name: null, limit: 25, fromPlanId: 'pro' },
      { key: 'api.calls', name: null, limit: 100000, fromPlanId: 'pro' },
      { key: 'support', name: null, limit: null, fromPlanId: 'base' },
    ]);
    const resolved = await t.ok('BillingPlanRpc.getData', { filter: { planId: 'pro' }, sort: {}, page: 1, pageSize: 5, resolveFeatures: true }, as(member));
    assert.equal(resolved.docs[0].features.length, 3);
    const loop = await t.call('BillingPlanRpc.update', { _id: base._id, basePlanId: 'pro' }, as(admin));
    assert.equal(code(loop), 'VALIDATION_ERROR');
    assert.match(loop.body.data.issues[0].message, /loop/);
    assert.deepEqual(await t.ok('BillingPlanRpc.getFieldValues', { fieldName: 'plan', reference: { valueField: 'planId', displayField: 'name', filter: { planId: { $in: ['base', 'pro'] } } } }, as(member)), [
      { value: 'base', label: 'Base' },
      { value: 'pro', label: 'Pro' },
    ]);
  });

  it('creates discounts with their rules, codes unique whatever their case, and deactivates on delete', async () => {
    const discount = await t.ok('DiscountRpc.create', { code: 'WELCOME10', name: 'Welcome', kind: 'percent', value: 10 }, as(staff));
    const { _id, createdAt, updatedAt, ...fields } = discount;
    assert.deepEqual(fields, {
      code: 'WELCOME10',
      name: 'Welcome',
      description: '',
      kind: 'percent',
      value: 10,
      currency: null,
      validFrom: null,
      validUntil: null,
      maxRedemptions: null,
      currentRedemptions: 0,
      planIds: [],
      isActive: true,
    });
    for (const [params, path] of [
      [{ code: 'P1X', name: 'P', kind: 'percent', value: 150 }, 'value'],
      [{ code: 'P1X', name: 'P', kind: 'percent', value: 10, currency: 'USD' }, 'currency'],
      [{ code: 'F1X', name: 'F', kind: 'fixed', value: 500 }, 'currency'],
      [{ code: 'F1X', name: 'F', kind: 'fixed', value: 500, currency: 'USD', planIds: ['no-such-plan'] }, 'planIds'],
      [{ code: 'F1X', name: 'F', kind: 'fixed', value: 500, currency: 'USD', validFrom: '2027-01-01', validUntil: '2026-01-01' }, 'validUntil'],
      [{ code: 'F1X', name: 'F', kind: 'fixed', value: 500, currency: 'USD', validFrom: 'next week' }, 'validFrom'],
      [{ code: 'a b', name: 'F', kind: 'percent', value: 5 }, 'code'],
      [{ code: 'F1X', name: 'F', kind: 'bogo', value: 5 }, 'kind'],
    ] as const) {
      const response = await t.call('DiscountRpc.create', params, as(admin));
      assert.equal(code(response), 'VALIDATION_ERROR', JSON.stringify(params));
      assert.ok(response.body.data.issues.some((issue: { path: string }) => issue.path === path), `${JSON.stringify(params)}: ${JSON.stringify(response.body.data.issues)}`);
    }
    assert.equal(code(await t.call('DiscountRpc.create', { code: 'welcome10', name: 'Again', kind: 'percent', value: 5 }, as(admin))), 'CONFLICT');
    assert.equal(code(await t.call('DiscountRpc.create', { code: 'MINE5', name: 'Mine', kind: 'percent', value: 5 }, as(member))), 'FORBIDDEN');
    const fixed = await t.ok('DiscountRpc.update', { _id: discount._id, kind: 'fixed', value: 500, currency: 'usd' }, as(admin));
    assert.deepEqual([fixed.kind, fixed.value, fixed.currency], ['fixed', 500, 'USD']);
    const back = await t.ok('DiscountRpc.update', { _id: discount._id, kind: 'percent', value: 15 }, as(admin));
    assert.deepEqual([back.kind, back.value, back.currency], ['percent', 15, null]);

    assert.deepEqual(await t.ok('DiscountRpc.delete', { _id: discount._id }, as(admin)), { success: true, message: 'Discount WELCOME10 deactivated' });
    assert.equal((await t.ok('DiscountRpc.findById', { _id: discount._id }, as(member))).isActive, false);
    const refused = await t.call('DiscountRpc.redeem', { code: 'welcome10' }, as(member));
    assert.deepEqual([code(refused), refused.body.data.error], ['CONFLICT', 'Discount WELCOME10 is not active']);
    assert.equal((await t.ok('DiscountRpc.getData', { ...list, filter: { isActive: false } }, as(member))).totalDocs, 1);
  });

  it('redeems a discount limited to 10 exactly 10 times out of 50 concurrent tries', async () => {
    const discount = await t.ok('DiscountRpc.create', { code: 'LIMITED', name: 'Limited', kind: 'percent', value: 20, maxRedemptions: 10 }, as(admin));
    const answers = await Promise.all(Array.from({ length: 50 }, (_, index) => t.call('DiscountRpc.redeem', { code: index % 2 ? 'limited' : 'LIMITED' }, as(index % 3 ? member : staff))));
    const succeeded = answers.filter((answer) => answer.status === 200);
    assert.equal(succeeded.length, 10);
    assert.deepEqual(succeeded.map((answer) => answer.body.data.currentRedemptions).sort((a, b) => a - b), [1, 2, 3, 4, 5, 6, 7, 8, 9, 10]);
    assert.ok(answers.filter((answer) => answer.status !== 200).every((answer) => code(answer) === 'CONFLICT'));
    const stored = await t.ok('DiscountRpc.findById', { _id: discount._id }, as(member));
    assert.equal(stored.currentRedemptions, 10);
    assert.match((await t.call('DiscountRpc.redeem', { code: 'LIMITED' }, as(member))).body.data.error, /redeemed 10 times/);
  });

  it('redeems only inside the validity window and for the plans the discount applies to', async () => {
    const hour = 3600_000;
    await t.ok('DiscountRpc.create', { code: 'LATER', name: 'Later', kind: 'percent', value: 5, validFrom: new Date(Date.now() + hour).toISOString() }, as(admin));
    await t.ok('DiscountRpc.create', { code: 'OVER', name: 'Over', kind: 'percent', value: 5, validUntil: new Date(Date.now() - hour).toISOString() }, as(admin));
    assert.match((await t.call('DiscountRpc.redeem', { code: 'LATER' }, as(member))).body.data.error, /valid from/);
    assert.match((await t.call('DiscountRpc.redeem', { code: 'OVER' }, as(member))).body.data.error, /expired/);
    assert.equal(code(await t.call('DiscountRpc.redeem', { code: 'NOSUCH' }, as(member))), 'NOT_FOUND');
    // A time without a zone is UTC whatever the server's zone.
    const zone = process.env.TZ;
    process.env.TZ = 'America/New_York';
    try {
      assert.equal((await t.ok('DiscountRpc.create', { code: 'NOZONE', name: 'No zone', kind: 'percent', value: 5, validFrom: '2099-01-01 10:00' }, as(admin))).validFrom, '2099-01-01T10:00:00.000Z');
    } finally {
      if (zone === undefined) delete process.env.TZ;
      else process.env.TZ = zone;
    }

    await t.ok('DiscountRpc.create', { code: 'SOLO-ONLY', name: 'Solo only', kind: 'fixed', value: 300, currency: 'USD', planIds: ['solo'], validUntil: new Date(Date.now() + hour).toISOString() }, as(admin));
    const redeemed = await t.ok('DiscountRpc.redeem', { code: 'solo-only', planId: 'solo' }, as(member));
    assert.deepEqual(redeemed, {
      _id: redeemed._id,
      code: 'SOLO-ONLY',
      kind: 'fixed',
      value: 300,
      currency: 'USD',
      planId: 'solo',
      currentRedemptions: 1,
      remainingRedemptions: null,
    });
    assert.match((await t.call('DiscountRpc.redeem', { code: 'SOLO-ONLY', planId: 'pro' }, as(member))).body.data.error, /does not apply to plan pro/);
    assert.equal(code(await t.call('DiscountRpc.redeem', { code: 'SOLO-ONLY', planId: 'unknown-plan' }, as(member))), 'VALIDATION_ERROR');
    const withoutPlan = await t.call('DiscountRpc.redeem', { code: 'SOLO-ONLY' }, as(member));
    assert.deepEqual([code(withoutPlan), withoutPlan.body.data.issues[0].path], ['VALIDATION_ERROR', 'planId']);
    assert.equal(code(await t.call('DiscountRpc.redeem', { code: 'SOLO-ONLY', planId: 'team' }, as(member))), 'CONFLICT', 'team is archived');
    assert.deepEqual(await t.ok('DiscountRpc.getFieldValues', { fieldName: 'discount', reference: { valueField: '_id', displayField: 'code', filter: { planIds: 'solo' } } }, as(member)), [
      { value: redeemed._id, label: 'SOLO-ONLY' },
    ]);
    const paged = await t.ok('DiscountRpc.getData', { filter: {}, sort: { code: 1 }, page: 2, pageSize: 2 }, as(member));
    assert.deepEqual([paged.page, paged.limit, paged.docs.length, paged.hasPrevPage], [2, 2, 2, true]);
  });

  it('keeps plans and discounts to their subscription', async () => {
    const plan = (await t.ok('BillingPlanRpc.getData', { ...list, filter: { planId: 'solo' } }, as(admin))).docs[0];
    const discount = (await t.ok('DiscountRpc.getData', { ...list, filter: { code: 'SOLO-ONLY' } }, as(admin))).docs[0];
    for (const [method, params] of [
      ['BillingPlanRpc.findById', { _id: plan._id }],
      ['BillingPlanRpc.update', { _id: plan._id, name: 'Taken' }],
      ['BillingPlanRpc.delete', { _id: plan._id }],
      ['DiscountRpc.findById', { _id: discount._id }],
      ['DiscountRpc.update', { _id: discount._id, name: 'Taken' }],
      ['DiscountRpc.delete', { _id: discount._id }],
      ['DiscountRpc.redeem', { code: 'SOLO-ONLY' }],
    ] as const) {
      assert.equal(code(await t.call(method, params, as(stranger))), 'NOT_FOUND', method);
    }
    assert.deepEqual(await t.ok('BillingPlanRpc.listPublicPlans', {}, as(stranger)), []);
    assert.equal((await t.ok('BillingPlanRpc.getData', list, as(stranger))).totalDocs, 0);
    assert.equal((await t.ok('DiscountRpc.getData', list, as(stranger))).totalDocs, 0);
    // The same planId and code are free in another subscription.
    await t.ok('BillingPlanRpc.create', { planId: 'solo', name: 'Their solo', currency: 'USD' }, as(stranger));
    await t.ok('DiscountRpc.create', { code: 'solo-only', name: 'Theirs', kind: 'percent', value: 50, planIds: ['solo'] }, as(stranger));
    assert.equal(code(await t.call('DiscountRpc.create', { code: 'X-PLAN', name: 'X', kind: 'percent', value: 5, planIds: ['base'] }, as(stranger))), 'VALIDATION_ERROR', "another subscription's plan");
    assert.equal((await t.ok('BillingPlanRpc.findById', { _id: plan._id }, as(admin))).name, 'Solo');
    assert.equal((await t.ok('DiscountRpc.findById', { _id: discount._id }, as(admin))).currentRedemptions, 1);
  });
});
