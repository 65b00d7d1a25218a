import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { startTestApp, type TestApp } from '../../../test/support/harness.ts';
import { signupTeam, type Team } from '../../../test/support/users.ts';

type Session = { token: string };
const as = (session: Session) => ({ token: session.token });
const list = { filter: {}, sort: {}, page: 1, pageSize: 25 };

describe('DiscountRpc', () => {
  let t: TestApp;
  let admin: Team['admin'];
  let staff: Team['staff'];
  let member: Team['member'];
  let stranger: Team['stranger'];
  const code = (response: { body: { data: { code?: string } } }) => response.body.data.code;

  before(async () => {
    t = await startTestApp({ withNotes: false, plugins: ['auth', 'billing-plan', 'discount'] });
    ({ admin, staff, member, stranger } = await signupTeam(t));
    // The plans discounts refer to: solo and pro active, team archived, base in the admin's subscription only.
    for (const planId of ['base', 'solo', 'pro', 'team'])
      await t.ok('BillingPlanRpc.create', { planId, name: planId[0]!.toUpperCase() + planId.slice(1), currency: 'USD' }, as(admin));
    const team = (await t.ok('BillingPlanRpc.getData', { ...list, filter: { planId: 'team' } }, as(admin))).docs[0];
    await t.ok('BillingPlanRpc.delete', { _id: team._id }, as(admin));
  });
  after(() => t.close());

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
      assert.ok(
        response.body.data.issues.some((issue: { path: string }) => issue.path === path),
        `${JSON.stringify(params)}: ${JSON.stringify(response.body.data.issues)}`,
      );
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
    const answers = await Promise.all(
      Array.from({ length: 50 }, (_, index) => t.call('DiscountRpc.redeem', { code: index % 2 ? 'limited' : 'LIMITED' }, as(index % 3 ? member : staff))),
    );
    const succeeded = answers.filter((answer) => answer.status === 200);
    assert.equal(succeeded.length, 10);
    assert.deepEqual(
      succeeded.map((answer) => answer.body.data.currentRedemptions).sort((a, b) => a - b),
      [1, 2, 3, 4, 5, 6, 7, 8, 9, 10],
    );
    assert.ok(answers.filter((answer) => answer.status !== 200).every((answer) => code(answer) === 'CONFLICT'));
    const stored = await t.ok('DiscountRpc.findById', { _id: discount._id }, as(member));
    assert.equal(stored.currentRedemptions, 10);
    assert.match((await t.call('DiscountRpc.redeem', { code: 'LIMITED' }, as(member))).body.data.error, /redeemed 10 times/);
  });

  it('redeems only inside the validity window and for the plans the discount applies to', async () => {
    const hour = 3600_000;
    await t.ok(
      'DiscountRpc.create',
      { code: 'LATER', name: 'Later', kind: 'percent', value: 5, validFrom: new Date(Date.now() + hour).toISOString() },
      as(admin),
    );
    await t.ok(
      'DiscountRpc.create',
      { code: 'OVER', name: 'Over', kind: 'percent', value: 5, validUntil: new Date(Date.now() - hour).toISOString() },
      as(admin),
    );
    assert.match((await t.call('DiscountRpc.redeem', { code: 'LATER' }, as(member))).body.data.error, /valid from/);
    assert.match((await t.call('DiscountRpc.redeem', { code: 'OVER' }, as(member))).body.data.error, /expired/);
    assert.equal(code(await t.call('DiscountRpc.redeem', { code: 'NOSUCH' }, as(member))), 'NOT_FOUND');
    // A time without a zone is UTC whatever the server's zone.
    const zone = process.env.TZ;
    process.env.TZ = 'America/New_York';
    try {
      assert.equal(
        (await t.ok('DiscountRpc.create', { code: 'NOZONE', name: 'No zone', kind: 'percent', value: 5, validFrom: '2099-01-01 10:00' }, as(admin))).validFrom,
        '2099-01-01T10:00:00.000Z',
      );
    } finally {
      if (zone === undefined) delete process.env.TZ;
      else process.env.TZ = zone;
    }

    await t.ok(
      'DiscountRpc.create',
      {
        code: 'SOLO-ONLY',
        name: 'Solo only',
        kind: 'fixed',
        value: 300,
        currency: 'USD',
        planIds: ['solo'],
        validUntil: new Date(Date.now() + hour).toISOString(),
      },
      as(admin),
    );
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
    assert.deepEqual(
      await t.ok(
        'DiscountRpc.getFieldValues',
        { fieldName: 'discount', reference: { valueField: '_id', displayField: 'code', filter: { planIds: 'solo' } } },
        as(member),
      ),
      [{ value: redeemed._id, label: 'SOLO-ONLY' }],
    );
    const paged = await t.ok('DiscountRpc.getData', { filter: {}, sort: { code: 1 }, page: 2, pageSize: 2 }, as(member));
    assert.deepEqual([paged.page, paged.limit, paged.docs.length, paged.hasPrevPage], [2, 2, 2, true]);
  });

  it('keeps discounts to their subscription', async () => {
    const discount = (await t.ok('DiscountRpc.getData', { ...list, filter: { code: 'SOLO-ONLY' } }, as(admin))).docs[0];
    for (const [method, params] of [
      ['DiscountRpc.findById', { _id: discount._id }],
      ['DiscountRpc.update', { _id: discount._id, name: 'Taken' }],
      ['DiscountRpc.delete', { _id: discount._id }],
      ['DiscountRpc.redeem', { code: 'SOLO-ONLY' }],
    ] as const) {
      assert.equal(code(await t.call(method, params, as(stranger))), 'NOT_FOUND', method);
    }
    assert.equal((await t.ok('DiscountRpc.getData', list, as(stranger))).totalDocs, 0);
    // The same code is free in another subscription, once that subscription has the plan.
    await t.ok('BillingPlanRpc.create', { planId: 'solo', name: 'Their solo', currency: 'USD' }, as(stranger));
    await t.ok('DiscountRpc.create', { code: 'solo-only', name: 'Theirs', kind: 'percent', value: 50, planIds: ['solo'] }, as(stranger));
    assert.equal(
      code(await t.call('DiscountRpc.create', { code: 'X-PLAN', name: 'X', kind: 'percent', value: 5, planIds: ['base'] }, as(stranger))),
      'VALIDATION_ERROR',
      "another subscription's plan",
    );
    assert.equal((await t.ok('DiscountRpc.findById', { _id: discount._id }, as(admin))).currentRedemptions, 1);
  });
});
