import * as v from 'valibot';
import { listSchema } from 'rpc-service/plugin';
import { defineOperation } from './deps.ts';
import { STATS, THREAD_SUMMARY, TRACE, USAGE } from './telemetry.service.ts';

const text = (label: string) => v.pipe(v.string(`${label} must be a string`), v.minLength(1, `${label} must not be empty`), v.maxLength(500));
const date = (label: string) =>
  v.pipe(
    v.union([v.string(), v.number()], `${label} must be an ISO 8601 date or a time in milliseconds`),
    v.transform((value) => new Date(value)),
    v.check((value) => !Number.isNaN(value.getTime()) && value.getUTCFullYear() >= 1 && value.getUTCFullYear() <= 9999, `${label} must be a valid date`),
  );
const positive = (label: string, max: number) =>
  v.pipe(
    v.number(`${label} must be a number`),
    v.integer(`${label} must be a whole number`),
    v.minValue(1, `${label} must be at least 1`),
    v.maxValue(max, `${label} must be at most ${max}`),
  );

const filterFields = {
  callerType: v.optional(text('filter.callerType')),
  callerName: v.optional(text('filter.callerName')),
  threadId: v.optional(text('filter.threadId')),
  subscriptionId: v.optional(text('filter.subscriptionId')),
  status: v.optional(text('filter.status')),
  dateFrom: v.optional(date('filter.dateFrom')),
  dateTo: v.optional(date('filter.dateTo')),
};
const unknownField = (fields: object) => `unknown field; filterable fields: ${Object.keys(fields).join(', ')}`;

const filter = v.optional(v.strictObject(filterFields, unknownField(filterFields)), {});
/** Usage is read over callers, statuses and time; by thread or subscription it is the other views' business. */
const { threadId: _thread, subscriptionId: _subscription, ...usageFields } = filterFields;
const usageFilter = v.optional(v.strictObject(usageFields, unknownField(usageFields)), {});

export const listThreads = defineOperation({
  access: 'user',
  kind: 'read',
  describe: 'AI calls grouped by thread (a call without one is its own group), latest first; sort.direction "asc" gives oldest first.',
  result: listSchema(THREAD_SUMMARY),
  params: v.object({
    page: v.optional(positive('page', 1_000_000), 1),
    pageSize: v.optional(positive('pageSize', 200), 50),
    filter,
    // Only direction is read; anything but "asc" means newest first. Other keys are refused rather than silently ignored.
    sort: v.optional(v.strictObject({ direction: v.optional(v.unknown()) }, 'unknown field; sortable fields: direction'), {}),
  }),
  handler: ({ params, ctx, deps }) =>
    deps.telemetryService.listThreads(ctx, {
      filter: params.filter,
      direction: params.sort.direction === 'asc' ? 'asc' : 'desc',
      page: params.page,
      pageSize: params.pageSize,
    }),
});

export const getThread = defineOperation({
  access: 'user',
  kind: 'read',
  describe: 'Every trace of a thread, oldest first (a trace stored without a thread matches its own traceId); empty when none.',
  result: v.array(TRACE.schema),
  params: v.object({ threadId: text('threadId') }),
  handler: ({ params, ctx, deps }) => deps.telemetryService.getThread(ctx, params.threadId),
});

export const getTrace = defineOperation({
  access: 'user',
  kind: 'read',
  describe: 'One trace by its id; NOT_FOUND when there is none.',
  result: TRACE.schema,
  params: v.object({ traceId: v.pipe(v.string('traceId must be a string'), v.uuid('traceId must be a UUID')) }),
  handler: ({ params, ctx, deps }) => deps.telemetryService.getTrace(ctx, params.traceId),
});

export const getStats = defineOperation({
  access: 'user',
  kind: 'read',
  describe: 'Totals of the matching traces: traces, tokens, cached tokens, errors, average duration, threads, cache hit rate; all zeros when none match.',
  result: STATS,
  params: v.object({ filter }),
  handler: ({ params, ctx, deps }) => deps.telemetryService.getStats(ctx, params.filter),
});

export const getUsage = defineOperation({
  access: 'user',
  kind: 'read',
  describe:
    'Calls, errors and tokens of the matching traces per UTC day and model (oldest day first), and the 50th, 90th and 99th percentile of each model’s call duration in ms; empty lists when none match.',
  result: USAGE,
  params: v.object({ filter: usageFilter }),
  handler: ({ params, ctx, deps }) => deps.telemetryService.getUsage(ctx, params.filter),
});
