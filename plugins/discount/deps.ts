import { operationBuilder, type Deps } from 'rpc-service/plugin';
import type { DiscountService } from './discount.service.ts';

/** What DiscountRpc uses: the collections catalogue (getFieldValues) and the billing plans (what a discount applies to). */
export const DEPS = ['collections', 'planService'] as const;

export type DiscountDeps = Deps<typeof DEPS, { discountService: DiscountService }>;

export const defineOperation = operationBuilder<DiscountDeps>();
