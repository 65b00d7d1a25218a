import * as v from 'valibot';
import { currencyCode, fieldValuesParams, minorUnits, pageSchema, recordId, requiredListParams, trimmedText } from 'rpc-service/plugin';
import { defineOperation } from './deps.ts';
import { BILLING_CYCLES } from './plan.entity.ts';
import { PLAN_SCHEMA, PUBLIC_PLAN } from './plan.service.ts';

const planId = v.pipe(
  v.string('planId must be a string'),
  v.trim(),
  v.regex(/^[a-z0-9][a-z0-9_.-]{0,63}$/, 'planId must be lower-case letters, digits, _, . and -, at most 64 characters (like pro-monthly)'),
);
const feature = v.object(
  {
    key: v.pipe(v.string('a feature key must be a string'), v.regex(/^[a-z][a-zA-Z0-9_.-]{0,63}$/, 'a feature key is a name like seats or api.calls')),
    name: v.optional(v.nullable(trimmedText('features[].name', 200)), null),
    limit: v.optional(
      v.nullable(
        v.pipe(
          v.number('a feature limit must be a number'),
          v.integer('a feature limit is a whole number'),
          v.minValue(0),
          v.maxValue(Number.MAX_SAFE_INTEGER),
        ),
      ),
      null,
    ),
  },
  'a feature is {key, name?, limit?}',
);
/** Every field of a plan but planId, name and currency, each optional. */
const planFields = {
  description: v.optional(v.pipe(v.string('description must be a string'), v.maxLength(5000, 'description must be at most 5000 characters'))),
  oneTimeCost: v.optional(minorUnits('oneTimeCost')),
  recurringCost: v.optional(minorUnits('recurringCost')),
  billingCycle: v.optional(v.picklist(BILLING_CYCLES, `billingCycle must be one of ${BILLING_CYCLES.join(', ')}`)),
  trialDays: v.optional(
    v.pipe(
      v.number('trialDays must be a number'),
      v.integer('trialDays must be a whole number'),
      v.minValue(0),
      v.maxValue(365, 'trialDays must be at most 365'),
    ),
  ),
  features: v.optional(v.pipe(v.array(feature, 'features must be an array'), v.maxLength(100, 'at most 100 features'))),
  basePlanId: v.optional(v.nullable(planId)),
  isPublic: v.optional(v.boolean('isPublic must be true or false')),
  isArchived: v.optional(v.boolean('isArchived must be true or false')),
  sortOrder: v.optional(
    v.pipe(v.number('sortOrder must be a number'), v.integer('sortOrder must be a whole number'), v.minValue(-1_000_000), v.maxValue(1_000_000)),
  ),
};
const name = trimmedText('name', 200);
const resolveFeatures = v.optional(v.boolean('resolveFeatures must be true or false'), false);

export const create = defineOperation({
  access: 'staff',
  kind: 'write',
  describe: 'Create a billing plan: planId (unique, never changed), name and currency (ISO 4217) required; money in minor units (cents).',
  result: PLAN_SCHEMA,
  params: v.object({ planId, name, currency: currencyCode(), ...planFields }),
  handler: ({ params, ctx, deps }) => deps.planService.create(ctx, params),
});

export const update = defineOperation({
  access: 'staff',
  kind: 'write',
  describe: 'Change any field of a plan but planId.',
  result: PLAN_SCHEMA,
  params: v.object({ _id: recordId('_id'), planId: v.optional(planId), name: v.optional(name), currency: v.optional(currencyCode()), ...planFields }),
  handler: ({ params: { _id, ...input }, ctx, deps }) => deps.planService.update(ctx, _id, input),
});

export const remove = defineOperation({
  access: 'staff',
  kind: 'write',
  describe: 'Archive a plan (it is not removed): it leaves listPublicPlans and stays readable by id.',
  result: v.strictObject({ success: v.literal(true), message: v.string() }),
  params: v.object({ _id: recordId('_id') }),
  handler: ({ params, ctx, deps }) => deps.planService.delete(ctx, params._id),
});

export const findById = defineOperation({
  access: 'user',
  kind: 'read',
  describe: 'One plan; with resolveFeatures its features include those of its base plans it does not name itself, each with fromPlanId.',
  result: PLAN_SCHEMA,
  params: v.object({ _id: recordId('_id'), resolveFeatures }),
  handler: ({ params, ctx, deps }) => deps.planService.findById(ctx, params._id, params.resolveFeatures),
});

export const getData = defineOperation({
  access: 'user',
  kind: 'read',
  describe: 'Plans filtered and sorted (filter, sort, page and pageSize required; skip = (page - 1) * pageSize), in the paged envelope.',
  result: pageSchema(PLAN_SCHEMA),
  params: v.object({ ...requiredListParams(), resolveFeatures }),
  handler: ({ params, ctx, deps }) => deps.planService.getData(ctx, params),
});

export const getFieldValues = defineOperation({
  access: 'user',
  kind: 'read',
  describe: 'Values for a form field, as {value, label}, from the plans (reference.filter applied, at most 1000 read); fieldName is not used.',
  result: v.array(v.strictObject({ value: v.unknown(), label: v.string() })),
  params: fieldValuesParams,
  handler: ({ params, ctx, deps }) => deps.planService.getFieldValues(ctx, params.reference),
});

export const listPublicPlans = defineOperation({
  access: 'user',
  kind: 'read',
  describe: 'The public plans that are not archived, by sortOrder: {planId, name, description, currency, oneTimeCost, recurringCost, billingCycle}.',
  result: v.array(PUBLIC_PLAN),
  params: v.object({}),
  handler: ({ ctx, deps }) => deps.planService.listPublicPlans(ctx),
});
