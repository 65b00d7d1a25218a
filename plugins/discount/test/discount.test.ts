import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { RpcError } from 'rpc-service/plugin';
import { refused } from '../../../test/support/caller.ts';
import { startTestApp, type TestApp } from '../../../test/support/harness.ts';
import { signupTeam, type Team } from '../../../test/support/users.ts';

const list = { filter: {}, sort: {}, page: 1, pageSize: 25 };

describe('DiscountRpc', () => {
  let t: TestApp;
  let admin: Team['admin'];
  let staff: Team['staff'];
  let member: Team['member'];
  let stranger: Team['stranger'];

  before(async () => {
    t = await startTestApp({ withNotes: false, plugins: ['auth', 'billing-plan', 'discount'] });
    ({ admin, staff, member, stranger } = await signupTeam(t));
    // The plans discounts refer to: solo and pro active, team archived, base in the admin's subscription only.
    for (const planId of ['base', 'solo', 'pro', 'team'])
      await t.as(admin).BillingPlanRpc.create({ planId, name: planId[0]!.toUpperCase() + planId.slice(1), currency: 'USD' });
    const team = (await t.as(admin).BillingPlanRpc.getData({ ...list, filter: { planId: 'team' } })).docs[0];
    await t.as(admin).BillingPlanRpc.delete({ _id: team._id });
  });
  after(() => t.close());

  it('creates discounts with their rules, codes unique whatever their case, and deactivates on delete', async () => {
    const discount = await t.as(staff).DiscountRpc.create({ code: 'WELCOME10', name: 'Welcome', kind: 'percent', value: 10 });
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
      const error = await refused(t.as(admin).call('DiscountRpc.create', params), 'VALIDATION_ERROR', JSON.stringify(params));
      assert.ok(
        error.issues?.some((issue) => issue.path === path),
        `${JSON.stringify(params)}: ${JSON.stringify(error.issues)}`,
      );
    }
    await refused(t.as(admin).DiscountRpc.create({ code: 'welcome10', name: 'Again', kind: 'percent', value: 5 }), 'CONFLICT');
    await refused(t.as(member).DiscountRpc.create({ code: 'MINE5', name: 'Mine', kind: 'percent', value: 5 }), 'FORBIDDEN');
    const fixed = await t.as(admin).DiscountRpc.update({ _id: discount._id, kind: 'fixed', value: 500, currency: 'usd' });
    assert.deepEqual([fixed.kind, fixed.value, fixed.currency], ['fixed', 500, 'USD']);
    const back = await t.as(admin).DiscountRpc.update({ _id: discount._id, kind: 'percent', value: 15 });
    assert.deepEqual([back.kind, back.value, back.currency], ['percent', 15, null]);

    assert.deepEqual(await t.as(admin).DiscountRpc.delete({ _id: discount._id }), { success: true, message: 'Discount WELCOME10 deactivated' });
    assert.equal((await t.as(member).DiscountRpc.findById({ _id: discount._id })).isActive, false);
    const inactive = await refused(t.as(member).DiscountRpc.redeem({ code: 'welcome10' }), 'CONFLICT');
    assert.equal(inactive.message, 'Discount WELCOME10 is not active');
    assert.equal((await t.as(member).DiscountRpc.getData({ ...list, filter: { isActive: false } })).totalDocs, 1);
  });

  it('redeems a discount limited to 10 exactly 10 times out of 50 concurrent tries', async () => {
    const discount = await t.as(admin).DiscountRpc.create({ code: 'LIMITED', name: 'Limited', kind: 'percent', value: 20, maxRedemptions: 10 });
    const answers = await Promise.allSettled(
      Array.from({ length: 50 }, (_, index) => t.as(index % 3 ? member : staff).DiscountRpc.redeem({ code: index % 2 ? 'limited' : 'LIMITED' })),
    );
    const succeeded = answers.flatMap((answer) => (answer.status === 'fulfilled' ? [answer.value] : []));
    assert.equal(succeeded.length, 10);
    assert.deepEqual(
      succeeded.map((answer) => answer.currentRedemptions).sort((a, b) => a - b),
      [1, 2, 3, 4, 5, 6, 7, 8, 9, 10],
    );
    assert.ok(answers.every((answer) => answer.status === 'fulfilled' || (answer.reason instanceof RpcError && answer.reason.code === 'CONFLICT')));
    const stored = await t.as(member).DiscountRpc.findById({ _id: discount._id });
    assert.equal(stored.currentRedemptions, 10);
    assert.match((await refused(t.as(member).DiscountRpc.redeem({ code: 'LIMITED' }), 'CONFLICT')).message, /redeemed 10 times/);
  });

  it('redeems only inside the validity window and for the plans the discount applies to', async () => {
    const hour = 3600_000;
    await t.as(admin).DiscountRpc.create({ code: 'LATER', name: 'Later', kind: 'percent', value: 5, validFrom: new Date(Date.now() + hour).toISOString() });
    await t.as(admin).DiscountRpc.create({ code: 'OVER', name: 'Over', kind: 'percent', value: 5, validUntil: new Date(Date.now() - hour).toISOString() });
    assert.match((await refused(t.as(member).DiscountRpc.redeem({ code: 'LATER' }), 'CONFLICT')).message, /valid from/);
    assert.match((await refused(t.as(member).DiscountRpc.redeem({ code: 'OVER' }), 'CONFLICT')).message, /expired/);
    await refused(t.as(member).DiscountRpc.redeem({ code: 'NOSUCH' }), 'NOT_FOUND');
    // A time without a zone is UTC whatever the server's zone.
    const zone = process.env.TZ;
    process.env.TZ = 'America/New_York';
    try {
      assert.equal(
        (await t.as(admin).DiscountRpc.create({ code: 'NOZONE', name: 'No zone', kind: 'percent', value: 5, validFrom: '2099-01-01 10:00' })).validFrom,
        '2099-01-01T10:00:00.000Z',
      );
    } finally {
      if (zone === undefined) delete process.env.TZ;
      else process.env.TZ = zone;
    }

    await t.as(admin).DiscountRpc.create({
      code: 'SOLO-ONLY',
      name: 'Solo only',
      kind: 'fixed',
      value: 300,
      currency: 'USD',
      planIds: ['solo'],
      validUntil: new Date(Date.now() + hour).toISOString(),
    });
    const redeemed = await t.as(member).DiscountRpc.redeem({ code: 'solo-only', planId: 'solo' });
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
    assert.match((await refused(t.as(member).DiscountRpc.redeem({ code: 'SOLO-ONLY', planId: 'pro' }), 'CONFLICT')).message, /does not apply to plan pro/);
    await refused(t.as(member).DiscountRpc.redeem({ code: 'SOLO-ONLY', planId: 'unknown-plan' }), 'VALIDATION_ERROR');
    const withoutPlan = await refused(t.as(member).DiscountRpc.redeem({ code: 'SOLO-ONLY' }), 'VALIDATION_ERROR');
    assert.equal(withoutPlan.issues?.[0]?.path, 'planId');
    await refused(t.as(member).DiscountRpc.redeem({ code: 'SOLO-ONLY', planId: 'team' }), 'CONFLICT', 'team is archived');
    assert.deepEqual(
      await t
        .as(member)
        .DiscountRpc.getFieldValues({ fieldName: 'discount', reference: { valueField: '_id', displayField: 'code', filter: { planIds: 'solo' } } }),
      [{ value: redeemed._id, label: 'SOLO-ONLY' }],
    );
    const paged = await t.as(member).DiscountRpc.getData({ filter: {}, sort: { code: 1 }, page: 2, pageSize: 2 });
    assert.deepEqual([paged.page, paged.limit, paged.docs.length, paged.hasPrevPage], [2, 2, 2, true]);
  });

  it('keeps discounts to their subscription', async () => {
    const discount = (await t.as(admin).DiscountRpc.getData({ ...list, filter: { code: 'SOLO-ONLY' } })).docs[0];
    const theirs = t.as(stranger).DiscountRpc;
    for (const [method, call] of [
      ['DiscountRpc.findById', () => theirs.findById({ _id: discount._id })],
      ['DiscountRpc.update', () => theirs.update({ _id: discount._id, name: 'Taken' })],
      ['DiscountRpc.delete', () => theirs.delete({ _id: discount._id })],
      ['DiscountRpc.redeem', () => theirs.redeem({ code: 'SOLO-ONLY' })],
    ] as const) {
      await refused(call(), 'NOT_FOUND', method);
    }
    assert.equal((await t.as(stranger).DiscountRpc.getData(list)).totalDocs, 0);
    // The same code is free in another subscription, once that subscription has the plan.
    await t.as(stranger).BillingPlanRpc.create({ planId: 'solo', name: 'Their solo', currency: 'USD' });
    await t.as(stranger).DiscountRpc.create({ code: 'solo-only', name: 'Theirs', kind: 'percent', value: 50, planIds: ['solo'] });
    await refused(
      t.as(stranger).DiscountRpc.create({ code: 'X-PLAN', name: 'X', kind: 'percent', value: 5, planIds: ['base'] }),
      'VALIDATION_ERROR',
      "another subscription's plan",
    );
    assert.equal((await t.as(admin).DiscountRpc.findById({ _id: discount._id })).currentRedemptions, 1);
  });
});
