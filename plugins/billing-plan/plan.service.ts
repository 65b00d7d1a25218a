import { randomUUID } from 'node:crypto';
import * as v from 'valibot';
import {
  defineRecord,
  fieldsOf,
  notFound,
  pageOf,
  toOrderBy,
  toWhere,
  validationError,
  type AuthenticatedContext,
  type CollectionCatalogue,
  type EntityManager,
  type FieldReference,
  type FieldsOf,
  type InferRecord,
  type ListQuery,
  type Page,
  type ValidationIssue,
} from 'rpc-service/plugin';
import { BILLING_CYCLES, BillingPlan, feature, FEATURE, type PlanFeature } from './plan.entity.ts';

/** How many plans a chain of base plans may hold, the plan itself included. */
export const MAX_PLAN_CHAIN = 5;

/** What a caller sets; the service keeps the rest (id, subscription, timestamps). */
const EDITABLE = [
  'planId',
  'name',
  'description',
  'currency',
  'oneTimeCost',
  'recurringCost',
  'billingCycle',
  'trialDays',
  'features',
  'basePlanId',
  'isPublic',
  'isArchived',
  'sortOrder',
] as const;

export type PlanFields = FieldsOf<BillingPlan, (typeof EDITABLE)[number]>;

export type PlanInput = Partial<PlanFields>;

/** A feature as findById and getData give it with resolveFeatures: with the plan it comes from. */
const RESOLVED_FEATURE = v.strictObject({ ...feature, fromPlanId: v.string() });
export type ResolvedFeature = v.InferOutput<typeof RESOLVED_FEATURE>;

const PLAN = defineRecord(BillingPlan, { hide: ['subscriptionId'] });
export const PLAN_FIELDS = PLAN.fields;

/** With resolveFeatures, a plan's features include those of its base plans. */
export type PlanRecord = Omit<InferRecord<typeof PLAN>, 'features'> & { features: PlanFeature[] | ResolvedFeature[] };

const billingCycle = v.picklist(BILLING_CYCLES);

/** The plan as operations answer it: the derived record, its cycle one of BILLING_CYCLES and its features described. */
export const PLAN_SCHEMA = v.strictObject({ ...PLAN.entries, billingCycle, features: v.union([v.array(FEATURE), v.array(RESOLVED_FEATURE)]) });

/** What listPublicPlans shows anyone of the subscription. */
export const PUBLIC_PLAN = v.strictObject({
  planId: v.string(),
  name: v.string(),
  description: v.string(),
  currency: v.string(),
  oneTimeCost: v.number(),
  recurringCost: v.number(),
  billingCycle,
});
export type PublicPlan = v.InferOutput<typeof PUBLIC_PLAN>;

const DEFAULTS: Omit<PlanFields, 'planId' | 'name' | 'currency'> = {
  description: '',
  oneTimeCost: 0,
  recurringCost: 0,
  billingCycle: 'monthly',
  trialDays: 0,
  features: [],
  basePlanId: null,
  isPublic: false,
  isArchived: false,
  sortOrder: 0,
};

const toRecord = (plan: BillingPlan, features: PlanFeature[] | ResolvedFeature[] = plan.features): PlanRecord => ({ ...PLAN.toRecord(plan), features });

export const toPublicPlan = (plan: BillingPlan | PlanRecord): PublicPlan => ({
  planId: plan.planId,
  name: plan.name,
  description: plan.description,
  currency: plan.currency,
  oneTimeCost: plan.oneTimeCost,
  recurringCost: plan.recurringCost,
  billingCycle: plan.billingCycle,
});

/**
 * A subscription's billing plans. Plans are archived, never removed, since
 * customers and discounts keep referring to them; archived plans stay
 * readable by id and leave the public list.
 */
export class PlanService {
  readonly #collections: CollectionCatalogue;

  constructor({ collections }: { collections: CollectionCatalogue }) {
    this.#collections = collections;
  }

  async create(ctx: AuthenticatedContext, input: PlanInput & Pick<PlanFields, 'planId' | 'name' | 'currency'>): Promise<PlanRecord> {
    const fields: PlanFields = { ...DEFAULTS, ...input };
    await this.#check(ctx.em, fields);
    const now = new Date();
    const plan = ctx.em.create(BillingPlan, { id: randomUUID(), subscriptionId: ctx.subscriptionId, ...fields, createdAt: now, updatedAt: now });
    await ctx.em.flush();
    return toRecord(plan);
  }

  async update(ctx: AuthenticatedContext, id: string, input: PlanInput): Promise<PlanRecord> {
    const plan = await this.#find(ctx.em, id);
    if (input.planId !== undefined && input.planId !== plan.planId) {
      throw validationError([{ path: 'planId', message: 'planId cannot change: discounts, base plans and applications refer to it' }]);
    }
    const fields: PlanFields = { ...fieldsOf(plan, EDITABLE), ...input };
    await this.#check(ctx.em, fields);
    ctx.em.assign(plan, { ...input, updatedAt: new Date() });
    await ctx.em.flush();
    return toRecord(plan);
  }

  /** Archives the plan: it leaves the public list and stays readable. */
  async delete(ctx: AuthenticatedContext, id: string): Promise<{ success: true; message: string }> {
    const plan = await this.#find(ctx.em, id);
    if (plan.isArchived) return { success: true, message: `Plan ${plan.planId} was already archived` };
    plan.isArchived = true;
    plan.updatedAt = new Date();
    await ctx.em.flush();
    return { success: true, message: `Plan ${plan.planId} archived` };
  }

  async findById(ctx: AuthenticatedContext, id: string, resolveFeatures: boolean): Promise<PlanRecord> {
    const plan = await this.#find(ctx.em, id);
    return resolveFeatures ? toRecord(plan, await this.#resolvedFeatures(ctx.em, plan)) : toRecord(plan);
  }

  async getData(ctx: AuthenticatedContext, query: ListQuery & { resolveFeatures: boolean }): Promise<Page<PlanRecord>> {
    const sort = toOrderBy(query.sort, PLAN_FIELDS);
    const [plans, total] = await ctx.em.findAndCount(BillingPlan, toWhere(query.filter, PLAN_FIELDS), {
      orderBy: { ...sort, sortOrder: sort.sortOrder ?? 'asc', planId: sort.planId ?? 'asc', id: 'asc' },
      limit: query.pageSize,
      offset: (query.page - 1) * query.pageSize,
    });
    const records = await Promise.all(
      plans.map(async (plan) => (query.resolveFeatures ? toRecord(plan, await this.#resolvedFeatures(ctx.em, plan)) : toRecord(plan))),
    );
    return pageOf(records, total, query);
  }

  getFieldValues(ctx: AuthenticatedContext, reference: Omit<FieldReference, 'collection'>): Promise<{ value: unknown; label: string }[]> {
    return this.#collections.fieldValues(ctx, { ...reference, collection: 'billingPlans' });
  }

  /** Public plans that are not archived, in their sort order. */
  async listPublicPlans(ctx: AuthenticatedContext): Promise<PublicPlan[]> {
    const plans = await ctx.em.find(BillingPlan, { isPublic: true, isArchived: false }, { orderBy: { sortOrder: 'asc', recurringCost: 'asc', planId: 'asc' } });
    return plans.map(toPublicPlan);
  }

  /** Plans of the `billingPlans` collection (getFieldValues), filtered and sorted as getData does. */
  async listForCollection(ctx: AuthenticatedContext, query: Pick<ListQuery, 'filter' | 'sort'> & { limit: number }): Promise<PlanRecord[]> {
    const sort = toOrderBy(query.sort, PLAN_FIELDS);
    const plans = await ctx.em.find(BillingPlan, toWhere(query.filter, PLAN_FIELDS), {
      orderBy: { ...sort, planId: sort.planId ?? 'asc', id: 'asc' },
      limit: query.limit,
    });
    return plans.map((plan) => toRecord(plan));
  }

  /** The plans of these planIds in the caller's subscription (for DiscountRpc), archived ones included. */
  async byPlanIds(ctx: AuthenticatedContext, planIds: readonly string[]): Promise<PlanRecord[]> {
    if (planIds.length === 0) return [];
    return (await ctx.em.find(BillingPlan, { planId: { $in: [...planIds] } })).map((plan) => toRecord(plan));
  }

  async #find(em: EntityManager, id: string): Promise<BillingPlan> {
    const plan = await em.findOne(BillingPlan, { id });
    if (!plan) throw notFound(`Billing plan ${id} not found`);
    return plan;
  }

  /** Rules across fields: the cycle and its costs, unique feature keys, a base plan of the subscription with no loop and a bounded chain. */
  async #check(em: EntityManager, fields: PlanFields): Promise<void> {
    const issues: ValidationIssue[] = [];
    if (fields.billingCycle === 'one_time' && fields.recurringCost !== 0) {
      issues.push({ path: 'recurringCost', message: 'a one_time plan has no recurring cost; give 0 or choose a recurring billingCycle' });
    }
    if (fields.billingCycle === 'one_time' && fields.trialDays !== 0) issues.push({ path: 'trialDays', message: 'a one_time plan has no trial' });
    const keys = fields.features.map((feature) => feature.key);
    const repeated = keys.filter((key, index) => keys.indexOf(key) !== index);
    if (repeated.length > 0) issues.push({ path: 'features', message: `each feature key once; repeated: ${[...new Set(repeated)].join(', ')}` });
    if (fields.basePlanId !== null) {
      const chain = await this.#chain(em, fields.basePlanId, fields.planId);
      if (chain === 'missing') issues.push({ path: 'basePlanId', message: `no plan ${fields.basePlanId} in this subscription` });
      else if (chain === 'loop') issues.push({ path: 'basePlanId', message: `plan ${fields.basePlanId} builds on this plan: base plans must not loop` });
      else if (chain.length + 1 > MAX_PLAN_CHAIN) issues.push({ path: 'basePlanId', message: `a plan builds on at most ${MAX_PLAN_CHAIN - 1} base plans` });
    }
    if (issues.length > 0) throw validationError(issues);
  }

  /** The base plans from `basePlanId` down (nearest first), or why there is no such chain. */
  async #chain(em: EntityManager, basePlanId: string, planId: string): Promise<BillingPlan[] | 'missing' | 'loop'> {
    const chain: BillingPlan[] = [];
    for (let next: string | null = basePlanId; next !== null;) {
      if (next === planId || chain.some((plan) => plan.planId === next)) return 'loop';
      const plan: BillingPlan | null = await em.findOne(BillingPlan, { planId: next });
      if (!plan) return chain.length === 0 ? 'missing' : chain;
      chain.push(plan);
      if (chain.length > MAX_PLAN_CHAIN) break;
      next = plan.basePlanId ?? null;
    }
    return chain;
  }

  /** The plan's features with those of its base plans it does not name itself, each with the plan it comes from. */
  async #resolvedFeatures(em: EntityManager, plan: BillingPlan): Promise<ResolvedFeature[]> {
    const chain = plan.basePlanId ? await this.#chain(em, plan.basePlanId, plan.planId) : [];
    const resolved = new Map<string, ResolvedFeature>();
    for (const source of [plan, ...(Array.isArray(chain) ? chain : [])]) {
      for (const feature of source.features) if (!resolved.has(feature.key)) resolved.set(feature.key, { ...feature, fromPlanId: source.planId });
    }
    return [...resolved.values()];
  }
}
