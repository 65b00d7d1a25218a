import { defineEntity, type InferEntity, type Role } from 'rpc-service/plugin';

/** What a subscription's admins require of its people: a second factor for admins, staff and admins, or everyone, after a grace period. */
export const FactorPolicy = defineEntity({
  name: 'FactorPolicy',
  tableName: 'account_security_policy',
  properties: (p) => ({
    subscriptionId: p.uuid().primary(),
    /** `nobody`, `admins`, `staff` (staff and admins) or `everyone`. */
    requiredFor: p.text(),
    /** Days a person the policy covers may still sign in without a factor: counted from `since`, or from their account's making when later. */
    graceDays: p.integer(),
    /**
     * From when each role has been covered: a role newly covered starts its
     * grace period then; one already covered keeps its date whatever else changes.
     */
    coveredSince: p.json<Partial<Record<Role, string>>>(),
    updatedAt: p.datetime(),
    updatedBy: p.uuid(),
  }),
});
export type FactorPolicy = InferEntity<typeof FactorPolicy>;
