import { operationBuilder, type Deps } from 'rpc-service/plugin';
import type { PlanService } from './plan.service.ts';

/** What BillingPlanRpc uses: the collections catalogue (getFieldValues). */
export const DEPS = ['collections'] as const;

export type BillingPlanDeps = Deps<typeof DEPS, { planService: PlanService }>;

export const defineOperation = operationBuilder<BillingPlanDeps>();
