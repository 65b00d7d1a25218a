import * as v from 'valibot';
import type { App } from '../app/app.ts';
import type { JobService } from '../jobs/job-service.ts';
import type { FailedJob, QueueCounts } from '../jobs/job-views.ts';
import { parseArgs } from './args.ts';
import { OperatorError, type OperatorCommand } from './command.ts';

/**
 * `jobs list`, `jobs retry` and `jobs purge`: the job queue of every
 * subscription, for the operator (JobService's administration methods,
 * core/jobs/job-service.ts). Jobs are named by id and queue; their data,
 * which may hold a tenant's content, is never shown.
 */

/** The app's JobService: the core holds it itself (core/app/app.ts, CoreRoot); App types `jobs` as a plugin sees it. */
const jobServiceOf = (app: App): JobService => app.deps.jobs as JobService;

const queue = v.optional(v.pipe(v.string(), v.minLength(1, 'must not be empty')));

/** Refuses a queue no plugin declared, so a typo is not answered with "nothing to do". */
async function knownQueue(jobs: JobService, name: string | undefined): Promise<void> {
  if (name === undefined) return;
  const queues = (await jobs.queueCounts()).map((counts) => counts.queue);
  if (!queues.includes(name)) throw new OperatorError(`there is no queue "${name}"; the queues are: ${queues.join(', ')}`);
}

const JobsListArgs = v.object({
  queue,
  /** How many of the dead jobs to show, newest first. */
  limit: v.optional(
    v.pipe(v.number('must be a number'), v.integer('must be a whole number'), v.minValue(1, 'must be at least 1'), v.maxValue(1000, 'must be at most 1000')),
    20,
  ),
});

export interface JobsListResult {
  queues: QueueCounts[];
  failed: FailedJob[];
}

export const jobsList: OperatorCommand<v.InferInput<typeof JobsListArgs>, JobsListResult> = {
  async run(app, args) {
    const { queue: name, limit } = parseArgs(JobsListArgs, args);
    const jobs = jobServiceOf(app);
    await knownQueue(jobs, name);
    const queues = (await jobs.queueCounts()).filter((counts) => name === undefined || counts.queue === name);
    return { queues, failed: await jobs.failedJobs({ queue: name, limit }) };
  },
};

const JobsRetryArgs = v.pipe(
  v.object({ id: v.optional(v.pipe(v.string(), v.uuid('is not a job id'))), allFailed: v.optional(v.boolean()), queue }),
  v.check(({ id, allFailed }) => (id === undefined) === (allFailed === true), 'give a job id or --all-failed (one of them)'),
);

export const jobsRetry: OperatorCommand<v.InferInput<typeof JobsRetryArgs>, { retried: number }> = {
  async run(app, args) {
    const { id, queue: name } = parseArgs(JobsRetryArgs, args);
    const jobs = jobServiceOf(app);
    await knownQueue(jobs, name);
    const retried = await jobs.retryFailed(id === undefined ? { queue: name } : { id });
    if (id !== undefined && retried === 0) throw new OperatorError(`no dead job has the id ${id} (jobs list shows them)`);
    return { retried };
  },
};

const SECONDS = { s: 1, m: 60, h: 3600, d: 86_400 } as const;

const JobsPurgeArgs = v.object({
  state: v.picklist(['failed', 'completed'], 'give --failed or --completed'),
  olderThan: v.optional(
    v.pipe(
      v.string(),
      v.regex(/^\d+[smhd]$/, 'must be a number and a unit, s, m, h or d: 30m, 12h, 7d'),
      v.transform((age) => Number(age.slice(0, -1)) * SECONDS[age.at(-1) as keyof typeof SECONDS]),
    ),
  ),
  queue,
});

export const jobsPurge: OperatorCommand<v.InferInput<typeof JobsPurgeArgs>, { deleted: number }> = {
  async run(app, args, report) {
    const { state, olderThan, queue: name } = parseArgs(JobsPurgeArgs, args);
    const jobs = jobServiceOf(app);
    await knownQueue(jobs, name);
    const deleted = await jobs.purgeFinished({ state: state === 'failed' ? 'dead' : 'done', queue: name, olderThanSeconds: olderThan }, (done, total) =>
      report({ label: 'jobs', done, total, unit: 'items' }),
    );
    return { deleted };
  },
};
