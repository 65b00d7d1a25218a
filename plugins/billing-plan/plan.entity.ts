import * as v from 'valibot';
import { defineEntity, type InferEntity } from 'rpc-service/plugin';

export const feature = { key: v.string(), name: v.nullable(v.string()), limit: v.nullable(v.number()) };
/** One feature a plan grants (the features column): a key the application checks, a display name, and a limit (null: no limit). */
export const FEATURE = v.strictObject(feature);
export type PlanFeature = v.InferOutput<typeof FEATURE>;

export const BILLING_CYCLES = ['one_time', 'weekly', 'monthly', 'quarterly', 'yearly'] as const;
export type BillingCycle = (typeof BILLING_CYCLES)[number];

/**
 * A billing plan of a subscription's catalogue. Money is in the currency's
 * minor unit (cents); a plan may build on a base plan, whose features it
 * inherits unless it names them itself. Deleting archives it.
 */
export const BillingPlan = defineEntity({
  name: 'BillingPlan',
  tableName: 'billing_plan',
  properties: (p) => ({
    subscriptionId: p.uuid().primary(),
    id: p.uuid().primary(),
    /** The plan's identifier in applications and discounts; unique in the subscription, never changed. */
    planId: p.text(),
    name: p.text(),
    description: p.text(),
    /** ISO 4217, upper case. */
    currency: p.text(),
    oneTimeCost: p.bigint('number'),
    recurringCost: p.bigint('number'),
    billingCycle: p.text().$type<BillingCycle>(),
    trialDays: p.integer(),
    features: p.json<PlanFeature[]>(),
    /** The planId of the plan this one builds on. */
    basePlanId: p.text().nullable(),
    isPublic: p.boolean(),
    isArchived: p.boolean(),
    /** Order in public lists (lowest first). */
    sortOrder: p.integer(),
    createdAt: p.datetime(),
    updatedAt: p.datetime(),
  }),
  uniques: [{ properties: ['subscriptionId', 'planId'] }],
  indexes: [{ properties: ['subscriptionId', 'isPublic', 'isArchived', 'sortOrder'] }],
});
export type BillingPlan = InferEntity<typeof BillingPlan>;
