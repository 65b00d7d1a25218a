import {
  defineRecord,
  notFound,
  rowTimestamp,
  wireTimestamp,
  type AiCall,
  type AuthenticatedContext,
  type Database,
  type InferRecord,
} from 'rpc-service/plugin';
import * as v from 'valibot';
import { AiTrace } from './trace.entity.ts';

export interface TraceFilter {
  callerType?: string;
  callerName?: string;
  threadId?: string;
  subscriptionId?: string;
  status?: string;
  dateFrom?: Date;
  dateTo?: Date;
}

export const THREAD_SUMMARY = v.strictObject({
  threadId: v.string(),
  latestTimestamp: wireTimestamp,
  earliestTimestamp: wireTimestamp,
  turnCount: v.number(),
  totalTokens: v.number(),
  cachedTokens: v.number(),
  callerType: v.string(),
  callerName: v.string(),
  subscriptionId: v.nullable(v.string()),
  hasErrors: v.boolean(),
});
export type ThreadSummary = v.InferOutput<typeof THREAD_SUMMARY>;

/** A trace as the operations answer it: its row's columns (read as raw rows of aggregate queries, mapped by toTrace below). */
export const TRACE = defineRecord(AiTrace);
export type TraceRecord = InferRecord<typeof TRACE>;

export const STATS = v.strictObject({
  totalTraces: v.number(),
  totalTokens: v.number(),
  totalCachedTokens: v.number(),
  errorCount: v.number(),
  avgDurationMs: v.number(),
  uniqueThreadCount: v.number(),
  cacheHitRate: v.number(),
});
export type Stats = v.InferOutput<typeof STATS>;

/** Calls, tokens and cost of one model on one UTC day. */
const DAILY_USAGE = v.strictObject({
  day: v.string(),
  model: v.string(),
  calls: v.number(),
  errors: v.number(),
  inputTokens: v.number(),
  outputTokens: v.number(),
  totalTokens: v.number(),
  /** The sum of the priced calls' costs in US dollars; null when none of them was priced. */
  costUsd: v.nullable(v.number()),
});

/** Percentiles of one model's call durations, in milliseconds. */
const LATENCY = v.strictObject({ model: v.string(), calls: v.number(), p50Ms: v.number(), p90Ms: v.number(), p99Ms: v.number() });

export const USAGE = v.strictObject({ daily: v.array(DAILY_USAGE), latency: v.array(LATENCY) });
export type Usage = v.InferOutput<typeof USAGE>;

type Row = Record<string, unknown>;

/** A trace without a threadId is a thread of its own, named by its traceId. */
const GROUP = `coalesce(thread_id, trace_id::text)`;
const TRACE_COLUMNS =
  'trace_id, thread_id, request_timestamp, duration_ms, status, provider, model, operation, caller_type, caller_name, subscription_id, user_id, ' +
  'input_tokens, output_tokens, cached_tokens, total_tokens, cost_usd, attempts, error';

const iso = (value: unknown): string => rowTimestamp(value as Date | string).toISOString();
const int = (value: unknown): number => Number(value ?? 0);

const toTrace = (row: Row): TraceRecord => ({
  traceId: row.trace_id as string,
  threadId: (row.thread_id as string | null) ?? null,
  requestTimestamp: iso(row.request_timestamp),
  durationMs: int(row.duration_ms),
  status: row.status as string,
  provider: row.provider as string,
  model: row.model as string,
  operation: row.operation as string,
  callerType: row.caller_type as string,
  callerName: row.caller_name as string,
  subscriptionId: row.subscription_id as string,
  userId: (row.user_id as string | null) ?? null,
  inputTokens: int(row.input_tokens),
  outputTokens: int(row.output_tokens),
  cachedTokens: int(row.cached_tokens),
  totalTokens: int(row.total_tokens),
  costUsd: row.cost_usd === null || row.cost_usd === undefined ? null : Number(row.cost_usd),
  attempts: int(row.attempts),
  error: (row.error as string | null) ?? null,
});

/**
 * The traces of the AI calls the core's client reports, and read-only views
 * of them. An admin sees every trace of the subscription; any other role the
 * traces of calls made for them.
 */
export class TelemetryService {
  readonly #db: Database;

  constructor({ db }: { db: Database }) {
    this.#db = db;
  }

  /**
   * A trace of one call, written on a connection of its own: never in the transaction of the request that made the call.
   * A call made for no subscription is no tenant's to read (every view is by subscription), so it is not kept.
   */
  async record(call: AiCall): Promise<void> {
    if (call.subscriptionId === null) return;
    await this.#db.forkEm(null).insert(AiTrace, { ...call, subscriptionId: call.subscriptionId });
  }

  async listThreads(
    ctx: AuthenticatedContext,
    query: { filter: TraceFilter; direction: 'asc' | 'desc'; page: number; pageSize: number },
  ): Promise<{ data: ThreadSummary[]; totalCount: number }> {
    const where = this.#where(ctx, query.filter);
    const [{ count }] = (await ctx.em.execute(`select count(distinct ${GROUP}) as count from ai_telemetry_trace where ${where.sql}`, where.params)) as [Row];
    // The group's caller is that of its latest trace.
    const rows: Row[] = await ctx.em.execute(
      `select ${GROUP} as thread_id, max(request_timestamp) as latest, min(request_timestamp) as earliest, count(*) as turns,
              sum(total_tokens) as total_tokens, sum(cached_tokens) as cached_tokens, bool_or(status = 'error') as has_errors,
              (array_agg(caller_type order by request_timestamp desc))[1] as caller_type,
              (array_agg(caller_name order by request_timestamp desc))[1] as caller_name,
              (array_agg(subscription_id order by request_timestamp desc))[1] as subscription_id
       from ai_telemetry_trace where ${where.sql}
       group by ${GROUP}
       order by latest ${query.direction}, ${GROUP}
       limit ? offset ?`,
      [...where.params, query.pageSize, (query.page - 1) * query.pageSize],
    );
    return {
      data: rows.map((row) => ({
        threadId: row.thread_id as string,
        latestTimestamp: iso(row.latest),
        earliestTimestamp: iso(row.earliest),
        turnCount: int(row.turns),
        totalTokens: int(row.total_tokens),
        cachedTokens: int(row.cached_tokens),
        callerType: row.caller_type as string,
        callerName: row.caller_name as string,
        subscriptionId: (row.subscription_id as string | null) ?? null,
        hasErrors: Boolean(row.has_errors),
      })),
      totalCount: int(count),
    };
  }

  /** The traces of a thread, oldest first; also the trace stored without a thread whose traceId is the value. */
  async getThread(ctx: AuthenticatedContext, threadId: string): Promise<TraceRecord[]> {
    const where = this.#where(ctx, {});
    const rows: Row[] = await ctx.em.execute(
      `select ${TRACE_COLUMNS} from ai_telemetry_trace
       where ${where.sql} and (thread_id = ? or (thread_id is null and trace_id::text = ?))
       order by request_timestamp, trace_id`,
      [...where.params, threadId, threadId],
    );
    return rows.map(toTrace);
  }

  async getTrace(ctx: AuthenticatedContext, traceId: string): Promise<TraceRecord> {
    const where = this.#where(ctx, {});
    const [row] = (await ctx.em.execute(`select ${TRACE_COLUMNS} from ai_telemetry_trace where ${where.sql} and trace_id = ?`, [
      ...where.params,
      traceId,
    ])) as Row[];
    if (!row) throw notFound(`Trace ${traceId} not found`);
    return toTrace(row);
  }

  async getStats(ctx: AuthenticatedContext, filter: TraceFilter): Promise<Stats> {
    const where = this.#where(ctx, filter);
    const [row] = (await ctx.em.execute(
      `select count(*) as traces, coalesce(sum(total_tokens), 0) as tokens, coalesce(sum(cached_tokens), 0) as cached,
              coalesce(sum(input_tokens), 0) as input, count(*) filter (where status = 'error') as errors,
              coalesce(avg(duration_ms), 0) as duration, count(distinct ${GROUP}) as threads
       from ai_telemetry_trace where ${where.sql}`,
      where.params,
    )) as Row[];
    const input = int(row!.input);
    return {
      totalTraces: int(row!.traces),
      totalTokens: int(row!.tokens),
      totalCachedTokens: int(row!.cached),
      errorCount: int(row!.errors),
      avgDurationMs: Math.round(Number(row!.duration) * 100) / 100,
      uniqueThreadCount: int(row!.threads),
      // The share of input tokens served from the provider's cache.
      cacheHitRate: input === 0 ? 0 : Math.round((int(row!.cached) / input) * 10_000) / 10_000,
    };
  }

  /** The matching traces (calls, tokens, cost) per UTC day and model (oldest day first), and each model's duration percentiles over all of them. */
  async getUsage(ctx: AuthenticatedContext, filter: TraceFilter): Promise<Usage> {
    const where = this.#where(ctx, filter);
    const daily: Row[] = await ctx.em.execute(
      `select to_char(request_timestamp at time zone 'UTC', 'YYYY-MM-DD') as day, model, count(*) as calls,
              count(*) filter (where status = 'error') as errors, coalesce(sum(input_tokens), 0) as input,
              coalesce(sum(output_tokens), 0) as output, coalesce(sum(total_tokens), 0) as total, sum(cost_usd) as cost
       from ai_telemetry_trace where ${where.sql}
       group by 1, model order by 1, model`,
      where.params,
    );
    const latency: Row[] = await ctx.em.execute(
      `select model, count(*) as calls, percentile_cont(0.5) within group (order by duration_ms) as p50,
              percentile_cont(0.9) within group (order by duration_ms) as p90, percentile_cont(0.99) within group (order by duration_ms) as p99
       from ai_telemetry_trace where ${where.sql}
       group by model order by model`,
      where.params,
    );
    const ms = (value: unknown) => Math.round(Number(value) * 100) / 100;
    return {
      daily: daily.map((row) => ({
        day: row.day as string,
        model: row.model as string,
        calls: int(row.calls),
        errors: int(row.errors),
        inputTokens: int(row.input),
        outputTokens: int(row.output),
        totalTokens: int(row.total),
        costUsd: row.cost === null ? null : Number(row.cost),
      })),
      latency: latency.map((row) => ({ model: row.model as string, calls: int(row.calls), p50Ms: ms(row.p50), p90Ms: ms(row.p90), p99Ms: ms(row.p99) })),
    };
  }

  /** The caller's subscription always; the caller's own traces unless an admin; then the filter keys. */
  #where(ctx: AuthenticatedContext, filter: TraceFilter): { sql: string; params: unknown[] } {
    const parts = ['subscription_id = ?'];
    const params: unknown[] = [ctx.subscriptionId];
    if (ctx.role !== 'admin') {
      parts.push('user_id = ?');
      params.push(ctx.userId);
    }
    const equal: [keyof TraceFilter, string][] = [
      ['callerType', 'caller_type'],
      ['callerName', 'caller_name'],
      ['status', 'status'],
    ];
    for (const [key, column] of equal) {
      if (filter[key] !== undefined) {
        parts.push(`${column} = ?`);
        params.push(filter[key]);
      }
    }
    if (filter.threadId !== undefined) {
      parts.push(`${GROUP} = ?`);
      params.push(filter.threadId);
    }
    if (filter.subscriptionId !== undefined) {
      // Another subscription's id matches nothing: the caller's is already required.
      parts.push('subscription_id::text = ?');
      params.push(filter.subscriptionId);
    }
    if (filter.dateFrom) {
      parts.push('request_timestamp >= ?');
      params.push(filter.dateFrom);
    }
    if (filter.dateTo) {
      parts.push('request_timestamp <= ?');
      params.push(filter.dateTo);
    }
    return { sql: parts.join(' and '), params };
  }
}
