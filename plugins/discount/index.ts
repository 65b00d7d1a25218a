import { asClass } from 'awilix';
import { definePlugin } from 'rpc-service/plugin';
import { DEPS, type DiscountDeps } from './deps.ts';
import { Discount } from './discount.entity.ts';
import { DISCOUNT, DiscountService } from './discount.service.ts';
import { migrations } from './migrations/index.ts';
import { create, findById, getData, getFieldValues, redeem, remove, update } from './operations.ts';

/** DiscountRpc: a subscription's discount codes (percent or fixed, a validity window, a redemption limit, the plans they apply to), deactivated rather than removed. */
export const discountPlugin = definePlugin<DiscountDeps>({
  id: 'discount',
  group: 'DiscountRpc',
  coreVersion: '^2.0.0',
  deps: DEPS,
  entities: [Discount],
  migrations,
  services: { discountService: asClass(DiscountService).singleton() },
  extends: {
    'core.collections': (deps) => [
      {
        name: 'discounts',
        describe: "The subscription's discounts (fields as getData returns them).",
        fields: Object.keys(DISCOUNT.fields),
        list: (ctx, query) => deps.discountService.listForCollection(ctx, query),
      },
    ],
  },
  operations: { create, update, delete: remove, findById, getData, getFieldValues, redeem },
});
