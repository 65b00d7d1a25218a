import { asClass } from 'awilix';
import { definePlugin } from 'rpc-service/plugin';
import { DEPS, type BillingPlanDeps } from './deps.ts';
import { migrations } from './migrations/index.ts';
import { create, findById, getData, getFieldValues, listPublicPlans, remove, update } from './operations.ts';
import { BillingPlan } from './plan.entity.ts';
import { PLAN_FIELDS, PlanService } from './plan.service.ts';

declare module 'rpc-service/plugin' {
  interface PluginServices {
    /** The subscription's billing plans; DiscountRpc checks the plans a discount applies to (`byPlanIds`). */
    planService: PlanService;
  }
}

/** BillingPlanRpc: a subscription's catalogue of billing plans (prices in minor units, features with limits, base plans), archived rather than removed. */
export const billingPlanPlugin = definePlugin<BillingPlanDeps>({
  id: 'billing-plan',
  group: 'BillingPlanRpc',
  coreVersion: '^2.0.0',
  deps: DEPS,
  entities: [BillingPlan],
  migrations,
  services: { planService: asClass(PlanService).singleton() },
  exports: ['planService'],
  extends: {
    'core.collections': (deps) => [
      {
        name: 'billingPlans',
        describe: "The subscription's billing plans (fields as getData returns them).",
        fields: Object.keys(PLAN_FIELDS),
        list: (ctx, query) => deps.planService.listForCollection(ctx, query),
      },
    ],
  },
  operations: { create, update, delete: remove, findById, getData, getFieldValues, listPublicPlans },
});
