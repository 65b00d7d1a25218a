import { defineEntity, type InferEntity } from 'rpc-service/plugin';

export const DISCOUNT_KINDS = ['percent', 'fixed'] as const;

/**
 * A discount of a subscription: a code customers give, a percentage or a
 * fixed amount off, valid in a window, for some plans or all, redeemed at
 * most maxRedemptions times. Deleting deactivates it.
 */
export const Discount = defineEntity({
  name: 'Discount',
  tableName: 'discount',
  properties: (p) => ({
    subscriptionId: p.uuid().primary(),
    id: p.uuid().primary(),
    /** Unique in the subscription whatever its case; redeemed in any case. */
    code: p.text(),
    name: p.text(),
    description: p.text(),
    /** `percent` (value 1 to 100) or `fixed` (value in the currency's minor unit). */
    kind: p.text().$type<(typeof DISCOUNT_KINDS)[number]>(),
    value: p.bigint('number'),
    /** Only for `fixed`. */
    currency: p.text().nullable(),
    validFrom: p.datetime().nullable(),
    validUntil: p.datetime().nullable(),
    /** null: no limit. */
    maxRedemptions: p.integer().nullable(),
    currentRedemptions: p.integer(),
    /** The planIds of the billing plans it applies to; empty: every plan. */
    planIds: p.array(),
    isActive: p.boolean(),
    createdAt: p.datetime(),
    updatedAt: p.datetime(),
  }),
  uniques: [{ name: 'discount_code_unique', expression: 'create unique index "discount_code_unique" on "discount" ("subscription_id", upper("code"))' }],
  indexes: [{ properties: ['subscriptionId', 'isActive', 'createdAt'] }],
});
export type Discount = InferEntity<typeof Discount>;
