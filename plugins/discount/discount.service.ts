import { randomUUID } from 'node:crypto';
import * as v from 'valibot';
import {
  conflict,
  counted,
  defineRecord,
  fieldsOf,
  notFound,
  pageOf,
  toOrderBy,
  toWhere,
  validationError,
  type AuthenticatedContext,
  type CollectionCatalogue,
  type FieldReference,
  type FieldsOf,
  type InferRecord,
  type ListQuery,
  type Page,
  type PluginServices,
  type ValidationIssue,
} from 'rpc-service/plugin';
import { DISCOUNT_KINDS, Discount } from './discount.entity.ts';

/** What a caller sets; the service keeps the rest (id, subscription, redemptions, timestamps). */
const EDITABLE = ['code', 'name', 'description', 'kind', 'value', 'currency', 'validFrom', 'validUntil', 'maxRedemptions', 'planIds', 'isActive'] as const;

export type DiscountFields = FieldsOf<Discount, (typeof EDITABLE)[number]>;

export type DiscountInput = Partial<DiscountFields>;

export const DISCOUNT = defineRecord(Discount, { hide: ['subscriptionId'] });
export type DiscountRecord = InferRecord<typeof DISCOUNT>;

const kind = v.picklist(DISCOUNT_KINDS);

/** The discount as operations answer it: the derived record, its kind one of DISCOUNT_KINDS. */
export const DISCOUNT_SCHEMA = v.strictObject({ ...DISCOUNT.entries, kind });

/** What redeem answers: what the billing system needs to apply the discount, and the count. */
export const REDEMPTION = v.strictObject({
  _id: v.string(),
  code: v.string(),
  kind,
  value: v.number(),
  currency: v.nullable(v.string()),
  planId: v.nullable(v.string()),
  currentRedemptions: v.number(),
  /** null: no limit. */
  remainingRedemptions: v.nullable(v.number()),
});
export type Redemption = v.InferOutput<typeof REDEMPTION>;

/**
 * A subscription's discounts. Deleting deactivates (the record and its
 * redemption count stay); `redeem` counts a use in one statement that also
 * checks every condition, so concurrent redemptions never pass the limit.
 */
export class DiscountService {
  readonly #collections: CollectionCatalogue;
  readonly #plans: PluginServices['planService'];

  constructor({ collections, planService }: { collections: CollectionCatalogue; planService: PluginServices['planService'] }) {
    this.#collections = collections;
    this.#plans = planService;
  }

  async create(ctx: AuthenticatedContext, input: DiscountInput & Pick<DiscountFields, 'code' | 'name' | 'kind' | 'value'>): Promise<DiscountRecord> {
    const fields: DiscountFields = {
      description: '',
      currency: null,
      validFrom: null,
      validUntil: null,
      maxRedemptions: null,
      planIds: [],
      isActive: true,
      ...input,
    };
    await this.#check(ctx, fields);
    const now = new Date();
    const discount = ctx.em.create(Discount, {
      id: randomUUID(),
      subscriptionId: ctx.subscriptionId,
      ...fields,
      currentRedemptions: 0,
      createdAt: now,
      updatedAt: now,
    });
    await ctx.em.flush();
    return DISCOUNT.toRecord(discount);
  }

  async update(ctx: AuthenticatedContext, id: string, input: DiscountInput): Promise<DiscountRecord> {
    const discount = await this.#find(ctx, id);
    // A change of kind decides the currency: a percentage has none.
    const changes: DiscountInput = input.kind === 'percent' && input.currency === undefined ? { ...input, currency: null } : input;
    const fields: DiscountFields = { ...fieldsOf(discount, EDITABLE), ...changes };
    await this.#check(ctx, fields, id);
    ctx.em.assign(discount, { ...changes, updatedAt: new Date() });
    await ctx.em.flush();
    return DISCOUNT.toRecord(discount);
  }

  /** Deactivates the discount: it can no longer be redeemed, and stays readable. */
  async delete(ctx: AuthenticatedContext, id: string): Promise<{ success: true; message: string }> {
    const discount = await this.#find(ctx, id);
    if (!discount.isActive) return { success: true, message: `Discount ${discount.code} was already deactivated` };
    discount.isActive = false;
    discount.updatedAt = new Date();
    await ctx.em.flush();
    return { success: true, message: `Discount ${discount.code} deactivated` };
  }

  async findById(ctx: AuthenticatedContext, id: string): Promise<DiscountRecord> {
    return DISCOUNT.toRecord(await this.#find(ctx, id));
  }

  async getData(ctx: AuthenticatedContext, query: ListQuery): Promise<Page<DiscountRecord>> {
    const sort = toOrderBy(query.sort, DISCOUNT.fields);
    const [discounts, total] = await ctx.em.findAndCount(Discount, toWhere(query.filter, DISCOUNT.fields), {
      orderBy: { ...sort, createdAt: sort.createdAt ?? 'desc', id: 'asc' },
      limit: query.pageSize,
      offset: (query.page - 1) * query.pageSize,
    });
    return pageOf(discounts.map(DISCOUNT.toRecord), total, query);
  }

  getFieldValues(ctx: AuthenticatedContext, reference: Omit<FieldReference, 'collection'>): Promise<{ value: unknown; label: string }[]> {
    return this.#collections.fieldValues(ctx, { ...reference, collection: 'discounts' });
  }

  /** Discounts of the `discounts` collection (getFieldValues), filtered and sorted as getData does. */
  async listForCollection(ctx: AuthenticatedContext, query: Pick<ListQuery, 'filter' | 'sort'> & { limit: number }): Promise<DiscountRecord[]> {
    const sort = toOrderBy(query.sort, DISCOUNT.fields);
    const discounts = await ctx.em.find(Discount, toWhere(query.filter, DISCOUNT.fields), {
      orderBy: { ...sort, code: sort.code ?? 'asc', id: 'asc' },
      limit: query.limit,
    });
    return discounts.map(DISCOUNT.toRecord);
  }

  /**
   * Counts one use of the discount with this code, for a plan when given: one
   * UPDATE whose condition is every rule (active, in its window, under its
   * limit, for that plan), so of concurrent redemptions exactly as many pass
   * as the limit allows. When it changes nothing, says which rule refused.
   */
  async redeem(ctx: AuthenticatedContext, code: string, planId: string | null): Promise<Redemption> {
    if (planId !== null) await this.#checkPlan(ctx, planId);
    const [row] = await ctx.em.execute<{ id: string; current_redemptions: number; max_redemptions: number | null }[]>(
      `update discount set current_redemptions = current_redemptions + 1, updated_at = now()
       where subscription_id = ? and upper(code) = upper(?) and is_active
         and (max_redemptions is null or current_redemptions < max_redemptions)
         and (valid_from is null or valid_from <= now()) and (valid_until is null or valid_until > now())
         and (cardinality(plan_ids) = 0 or ?::text = any(plan_ids))
       returning id, current_redemptions, max_redemptions`,
      [ctx.subscriptionId, code, planId],
    );
    if (!row) throw await this.#refusal(ctx, code, planId);
    const discount = (await ctx.em.findOne(Discount, { id: row.id }, { refresh: true }))!;
    return {
      _id: discount.id,
      code: discount.code,
      kind: discount.kind,
      value: discount.value,
      currency: discount.currency ?? null,
      planId,
      currentRedemptions: row.current_redemptions,
      remainingRedemptions: row.max_redemptions === null ? null : row.max_redemptions - row.current_redemptions,
    };
  }

  async #refusal(ctx: AuthenticatedContext, code: string, planId: string | null): Promise<Error> {
    const [found] = await ctx.em.execute<{ id: string }[]>('select id from discount where subscription_id = ? and upper(code) = upper(?)', [
      ctx.subscriptionId,
      code,
    ]);
    const discount = found ? await ctx.em.findOne(Discount, { id: found.id }, { refresh: true }) : null;
    if (!discount) return notFound(`Discount ${code} not found`);
    const now = Date.now();
    if (!discount.isActive) return conflict(`Discount ${discount.code} is not active`);
    if (discount.validFrom && discount.validFrom.getTime() > now)
      return conflict(`Discount ${discount.code} is valid from ${discount.validFrom.toISOString()}`);
    if (discount.validUntil && discount.validUntil.getTime() <= now)
      return conflict(`Discount ${discount.code} expired at ${discount.validUntil.toISOString()}`);
    if (discount.maxRedemptions !== null && discount.maxRedemptions !== undefined && discount.currentRedemptions >= discount.maxRedemptions) {
      return conflict(`Discount ${discount.code} has been redeemed ${counted(discount.maxRedemptions, 'time')}, its limit`);
    }
    if (planId === null)
      return validationError([
        { path: 'planId', message: `discount ${discount.code} applies only to plans ${discount.planIds.join(', ')}; give the planId it is redeemed for` },
      ]);
    return conflict(`Discount ${discount.code} does not apply to plan ${planId}`);
  }

  /** The plan exists in the subscription and can still be bought. */
  async #checkPlan(ctx: AuthenticatedContext, planId: string): Promise<void> {
    const [plan] = await this.#plans.byPlanIds(ctx, [planId]);
    if (!plan) throw validationError([{ path: 'planId', message: `no billing plan ${planId} in this subscription` }]);
    if (plan.isArchived) throw conflict(`Billing plan ${planId} is archived`);
  }

  async #find(ctx: AuthenticatedContext, id: string): Promise<Discount> {
    const discount = await ctx.em.findOne(Discount, { id });
    if (!discount) throw notFound(`Discount ${id} not found`);
    return discount;
  }

  /** Rules across fields: value by kind, currency only for fixed amounts, the window's order, a free code and plans of the subscription. */
  async #check(ctx: AuthenticatedContext, fields: DiscountFields, exceptId?: string): Promise<void> {
    const issues: ValidationIssue[] = [];
    if (fields.kind === 'percent') {
      if (fields.value < 1 || fields.value > 100) issues.push({ path: 'value', message: 'a percent discount is 1 to 100' });
      if (fields.currency !== null) issues.push({ path: 'currency', message: 'a percent discount has no currency' });
    } else {
      if (fields.value < 1) issues.push({ path: 'value', message: 'a fixed discount is at least 1 (in minor units)' });
      if (fields.currency === null) issues.push({ path: 'currency', message: 'a fixed discount needs the currency of its amount' });
    }
    if (fields.validFrom && fields.validUntil && fields.validUntil.getTime() <= fields.validFrom.getTime()) {
      issues.push({ path: 'validUntil', message: 'validUntil must be after validFrom' });
    }
    if (fields.planIds.length > 0) {
      const found = new Set((await this.#plans.byPlanIds(ctx, fields.planIds)).map((plan) => plan.planId));
      const unknown = fields.planIds.filter((planId) => !found.has(planId));
      if (unknown.length > 0) issues.push({ path: 'planIds', message: `no billing plan ${unknown.join(', ')} in this subscription` });
    }
    const [taken] = await ctx.em.execute<{ id: string }[]>('select id from discount where subscription_id = ? and upper(code) = upper(?) and id <> ? limit 1', [
      ctx.subscriptionId,
      fields.code,
      exceptId ?? '00000000-0000-0000-0000-000000000000',
    ]);
    if (issues.length > 0) throw validationError(issues);
    if (taken) throw conflict(`A discount with code ${fields.code} already exists`);
  }
}
