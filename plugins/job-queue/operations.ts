import { notFound, pageOf, pageSchema, type JobState } from 'rpc-service/plugin';
import * as v from 'valibot';
import { defineOperation } from './deps.ts';

const STATES = ['waiting', 'retrying', 'running', 'done', 'dead', 'cancelled'] as const satisfies readonly JobState[];
const MAX_PAGE_SIZE = 100;

const COUNTS = v.strictObject({ queue: v.string(), states: v.strictObject(Object.fromEntries(STATES.map((state) => [state, v.number()]))) });

const JOB = v.strictObject({
  id: v.string(),
  queue: v.string(),
  state: v.picklist(STATES),
  attempts: v.number(),
  lastError: v.nullable(v.string()),
  runAt: v.string(),
  createdAt: v.string(),
  startedAt: v.nullable(v.string()),
  finishedAt: v.nullable(v.string()),
});

/** `<plugin id>.<job name>`: the same words the operator's `rpc-service jobs` shows. */
const queue = v.pipe(v.string('queue must be a string'), v.regex(/^[a-z0-9-]+\.[A-Za-z0-9_-]+$/, 'queue must be <plugin id>.<job name>'), v.maxLength(200));
const whole = (label: string, max: number) =>
  v.pipe(v.number(`${label} must be a number`), v.integer(`${label} must be a whole number`), v.minValue(1, `${label} must be at least 1`), v.maxValue(max));

export const getCounts = defineOperation({
  access: 'staff',
  kind: 'read',
  describe: "The subscription's background jobs per queue and state (waiting, retrying, running, done, dead, cancelled); queues with none are left out.",
  result: v.array(COUNTS),
  params: v.object({}),
  handler: ({ ctx, deps }) => deps.jobQueue.getCounts(ctx.subscriptionId),
});

export const listJobs = defineOperation({
  access: 'staff',
  kind: 'read',
  describe: "The subscription's background jobs, newest first, of one state and queue when given: attempts, last error and times, never their data.",
  result: pageSchema(JOB),
  params: v.object({
    state: v.optional(v.picklist(STATES, `state must be one of ${STATES.join(', ')}`)),
    queue: v.optional(queue),
    page: v.optional(whole('page', 1_000_000), 1),
    pageSize: v.optional(whole('pageSize', MAX_PAGE_SIZE), 20),
  }),
  handler: async ({ params, ctx, deps }) => {
    const { page, pageSize, state, queue } = params;
    const { jobs, total } = await deps.jobQueue.listJobs(ctx.subscriptionId, { state, queue, offset: (page - 1) * pageSize, limit: pageSize });
    return pageOf(jobs, total, { page, pageSize });
  },
});

export const retryJob = defineOperation({
  access: 'admin',
  kind: 'write',
  describe: "Puts one of the subscription's dead jobs back in its queue to run at once; NOT_FOUND when it has no dead job of that id.",
  result: v.strictObject({ retried: v.literal(true) }),
  params: v.object({ jobId: v.pipe(v.string('jobId must be a string'), v.uuid('jobId must be a UUID')) }),
  handler: async ({ params, ctx, deps }) => {
    if (!(await deps.jobQueue.retryJob(ctx.subscriptionId, params.jobId))) throw notFound(`No dead job ${params.jobId} in this subscription`);
    return { retried: true as const };
  },
});
