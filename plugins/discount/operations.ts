import * as v from 'valibot';
import { currencyCode, fieldValuesParams, isoTime, minorUnits, pageSchema, recordId, requiredListParams, stringList, trimmedText } from 'rpc-service/plugin';
import { defineOperation } from './deps.ts';
import { DISCOUNT_KINDS } from './discount.entity.ts';
import { DISCOUNT_SCHEMA, REDEMPTION } from './discount.service.ts';

const code = v.pipe(v.string('code must be a string'), v.trim(), v.regex(/^[A-Za-z0-9_-]{3,40}$/, 'code must be 3 to 40 letters, digits, _ and -'));
const planId = v.pipe(
  v.string('planId must be a string'),
  v.trim(),
  v.minLength(1, 'planId must not be empty'),
  v.maxLength(64, 'planId must be at most 64 characters'),
);
/** Every field of a discount but code, name, kind and value, each optional. */
const discountFields = {
  description: v.optional(v.pipe(v.string('description must be a string'), v.maxLength(5000, 'description must be at most 5000 characters'))),
  currency: v.optional(v.nullable(currencyCode())),
  validFrom: v.optional(v.nullable(isoTime('validFrom'))),
  validUntil: v.optional(v.nullable(isoTime('validUntil'))),
  maxRedemptions: v.optional(
    v.nullable(
      v.pipe(
        v.number('maxRedemptions must be a number'),
        v.integer('maxRedemptions must be a whole number'),
        v.minValue(1, 'maxRedemptions must be at least 1'),
        v.maxValue(2_000_000_000),
      ),
    ),
  ),
  planIds: v.optional(stringList('planIds', { maxItems: 200, maxLength: 64 })),
  isActive: v.optional(v.boolean('isActive must be true or false')),
};
const name = trimmedText('name', 200);
const kind = v.picklist(DISCOUNT_KINDS, 'kind must be percent or fixed');
/** 1 to 100 for percent, minor units for fixed: the service checks the range by kind. */
const value = minorUnits('value');

export const create = defineOperation({
  access: 'staff',
  kind: 'write',
  describe:
    'Create a discount: code (unique, any case), name, kind (percent: value 1-100; fixed: value in minor units with currency) required; validity window, maxRedemptions and planIds optional.',
  result: DISCOUNT_SCHEMA,
  params: v.object({ code, name, kind, value, ...discountFields }),
  handler: ({ params, ctx, deps }) => deps.discountService.create(ctx, params),
});

export const update = defineOperation({
  access: 'staff',
  kind: 'write',
  describe: 'Change any field of a discount but currentRedemptions, which only redeem counts.',
  result: DISCOUNT_SCHEMA,
  params: v.object({
    _id: recordId('_id'),
    code: v.optional(code),
    name: v.optional(name),
    kind: v.optional(kind),
    value: v.optional(value),
    ...discountFields,
  }),
  handler: ({ params: { _id, ...input }, ctx, deps }) => deps.discountService.update(ctx, _id, input),
});

export const remove = defineOperation({
  access: 'staff',
  kind: 'write',
  describe: 'Deactivate a discount (soft delete): it can no longer be redeemed and stays readable.',
  result: v.strictObject({ success: v.literal(true), message: v.string() }),
  params: v.object({ _id: recordId('_id') }),
  handler: ({ params, ctx, deps }) => deps.discountService.delete(ctx, params._id),
});

export const findById = defineOperation({
  access: 'user',
  kind: 'read',
  describe: 'One discount of the subscription.',
  result: DISCOUNT_SCHEMA,
  params: v.object({ _id: recordId('_id') }),
  handler: ({ params, ctx, deps }) => deps.discountService.findById(ctx, params._id),
});

export const getData = defineOperation({
  access: 'user',
  kind: 'read',
  describe: 'Discounts filtered and sorted (filter, sort, page and pageSize required; skip = (page - 1) * pageSize), in the paged envelope.',
  result: pageSchema(DISCOUNT_SCHEMA),
  params: v.object(requiredListParams()),
  handler: ({ params, ctx, deps }) => deps.discountService.getData(ctx, params),
});

export const getFieldValues = defineOperation({
  access: 'user',
  kind: 'read',
  describe: 'Values for a form field, as {value, label}, from the discounts (reference.filter applied, at most 1000 read); fieldName is not used.',
  result: v.array(v.strictObject({ value: v.unknown(), label: v.string() })),
  params: fieldValuesParams,
  handler: ({ params, ctx, deps }) => deps.discountService.getFieldValues(ctx, params.reference),
});

export const redeem = defineOperation({
  access: 'user',
  kind: 'write',
  describe:
    'Count one use of the discount with this code (any case), for a plan when planId is given; refused when inactive, outside its window, used up or not for that plan.',
  result: REDEMPTION,
  params: v.object({ code, planId: v.optional(v.nullable(planId), null) }),
  handler: ({ params, ctx, deps }) => deps.discountService.redeem(ctx, params.code, params.planId),
});
