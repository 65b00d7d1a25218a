import { randomUUID } from 'node:crypto';
import type { EntityManager } from '@mikro-orm/postgresql';
import PgBoss from 'pg-boss';
import * as v from 'valibot';
import { afterCommit } from '../db/after-commit.ts';
import { JOBS_SCHEMA, type Database } from '../db/orm.ts';
import { BUS_RESYNC, type EventBus } from '../events/bus.ts';
import type { Logger } from '../base/logger.ts';
import { createContext, type Principal, type RequestContext } from '../base/context.ts';
import { databaseErrorRecord, isDatabaseError } from '../base/database-errors.ts';
import { currentTraceparent, failActiveSpan, inSpan, remoteParent, SpanKind, tracingOn } from '../base/tracing.ts';
import {
  BOSS_STATES,
  countsByQueue,
  iso,
  lastErrorOf,
  progressOf,
  subscriptionJobOf,
  type FailedJob,
  type JobRow,
  type JobState,
  type JobView,
  type QueueCounts,
  type SubscriptionJob,
} from './job-views.ts';
import { sqlExecutor, type DrainableSqlExecutor } from './sql-executor.ts';

export interface RetryPolicy {
  /** Retries after the first attempt before the job is dead (default 3). */
  limit?: number;
  /** Wait before the first retry (default 10); doubled, with jitter, for each further one when `backoff` is on. */
  delaySeconds?: number;
  /** Exponential backoff (default true). */
  backoff?: boolean;
  /** No retry waits longer than this (default 3600). */
  maxDelaySeconds?: number;
}

export interface JobRun {
  id: string;
  /** `<plugin id>.<job name>` */
  name: string;
  /** 1 on the first run, 2 on the first retry, ... */
  attempt: number;
  /** Aborted when the job runs out of time; pass it to fetch and other cancellable work. */
  signal: AbortSignal;
}

export interface JobHandlerArgs<T, D> {
  data: T;
  /** The context of whoever enqueued the job (the same subscription, user and role), or an anonymous one. */
  ctx: RequestContext;
  deps: D;
  job: JobRun;
}

export interface JobDefinition<S extends v.GenericSchema = v.GenericSchema, D = unknown> {
  /** One line for the listing. */
  describe: string;
  /** Schema of the data; enqueue refuses data that does not match. */
  data: S;
  /** Returns plain JSON (kept as the job's output) or nothing; a throw fails the attempt. */
  handler(args: JobHandlerArgs<v.InferOutput<S>, D>): unknown;
  retry?: RetryPolicy;
  /** An attempt still running after this long fails (default 300). */
  timeoutSeconds?: number;
  /** Five-field cron expression in UTC: the job also runs on this schedule, with `{}` as data. */
  schedule?: string;
  /** Jobs of this kind one node runs at the same time (default 2). */
  concurrency?: number;
}

export const JOB_MARKER = Symbol.for('rpc-service.job');

export type Job = JobDefinition<v.GenericSchema, unknown> & { [JOB_MARKER]: true };

/** Declares one background job of a plugin: its data schema, handler, retries and optional schedule. */
export function defineJob<S extends v.GenericSchema, D = unknown>(definition: JobDefinition<S, D>): Job {
  return { ...definition, [JOB_MARKER]: true } as unknown as Job;
}

/** `defineJob` with the plugin's deps type fixed: `export const defineJob = jobBuilder<NoteDeps>();` */
export const jobBuilder =
  <D>() =>
  <S extends v.GenericSchema>(definition: JobDefinition<S, D>): Job =>
    defineJob(definition);

export interface EnqueueOptions {
  /** The job runs with this context's subscription, user and role. */
  ctx?: RequestContext;
  /** While a job with the same key waits to start, another enqueue with that key is dropped. */
  key?: string;
  /** Run no sooner than this many seconds from now. */
  delaySeconds?: number;
  /** Run no sooner than this moment. */
  runAt?: Date;
  /** Enqueue inside this EntityManager's transaction: the job exists only if the transaction commits. */
  em?: EntityManager;
  /** The subscription the job works for, when no user's `ctx` says it: its admins then see the job (JobQueue). */
  subscriptionId?: string;
}

/** What a plugin's `jobs` dep does: its own jobs, by the names it gave them. */
export interface Jobs {
  /** Queues a run; returns its id, or null when a job with the same key is still waiting. */
  enqueue(name: string, data: unknown, options?: EnqueueOptions): Promise<string | null>;
  get(name: string, id: string): Promise<JobView | null>;
  /** Cancels a job that has not finished; false when there is none. */
  cancel(name: string, id: string): Promise<boolean>;
}

/**
 * The queue as one subscription sees it (JobQueueRpc): the jobs of every
 * plugin enqueued for that subscription, by a user of it or for it.
 */
export interface JobQueue {
  /** Its jobs per queue and state; queues without any of its jobs are left out. */
  getCounts(subscriptionId: string): Promise<QueueCounts[]>;
  /** Its jobs newest first, of one state and queue when given, a page of them with the count of all. */
  listJobs(
    subscriptionId: string,
    options: { state?: JobState; queue?: string; offset: number; limit: number },
  ): Promise<{ jobs: SubscriptionJob[]; total: number }>;
  /** Puts one of its dead jobs back in its queue to run at once; false when it has no dead job of that id. */
  retryJob(subscriptionId: string, id: string): Promise<boolean>;
}

export interface RegisteredJob {
  pluginId: string;
  name: string;
  definition: Job;
  deps: unknown;
}

export interface JobServiceOptions {
  db: Database;
  logger: Logger;
  /** Carries the wake-up of a queue to every node (core/events/bus.ts: NOTIFY on PostgreSQL). */
  bus: EventBus;
  /** How often an idle node looks for due jobs it was not woken for (delayed ones, retries, wake-ups lost with a connection). */
  pollMs: number;
}

/** An internal event (no subscription: no client hears it): a job of the queue in its payload is ready to start. */
const JOBS_WAKE = 'core.jobs.wake';

/** What a job row carries: the data, and who enqueued it so the handler gets their context (and, traced, their trace). */
interface Envelope {
  data: unknown;
  principal: Principal | null;
  /** Whose job it is (the principal's subscription, or the one the enqueue named); JobQueue reads it. */
  subscriptionId?: string | null;
  /** The W3C trace context of the span that enqueued the job, when tracing was on. */
  traceparent?: string;
}

/** What pg-boss stores as a completed job's output. */
type Completion = { result: unknown };
const DEFAULT_RETRY = { limit: 3, delaySeconds: 10, backoff: true, maxDelaySeconds: 3600 } satisfies Required<RetryPolicy>;
const DEFAULT_TIMEOUT_SECONDS = 300;
const DEFAULT_CONCURRENCY = 2;
/** How often the workers of a queue's further slots look for jobs they were not woken for. */
const SIBLING_POLL_SECONDS = 30;
/** pg-boss's own expiry backs up the handler's timeout, a little later, for attempts lost with their node. */
const EXPIRY_GRACE_SECONDS = 30;

/**
 * The durable job service: pg-boss on the service's own database (PGlite or
 * PostgreSQL). Jobs are rows, so they survive restarts; workers on every node
 * claim them with `FOR UPDATE SKIP LOCKED`, so each attempt runs on one node.
 */
export class JobService implements Jobs, JobQueue {
  readonly #boss: PgBoss;
  readonly #sql: DrainableSqlExecutor;
  readonly #db: Database;
  readonly #logger: Logger;
  readonly #pollSeconds: number;
  readonly #bus: EventBus;
  readonly #unsubscribe: (() => void)[] = [];
  readonly #jobs = new Map<string, RegisteredJob>();
  /** Each queue's workers, one per slot of its concurrency: those running a job now, and those told to look for one. */
  readonly #workers = new Map<string, { ids: string[]; busy: Set<string>; woken: Set<string> }>();
  /** Attempts under way, so a stop can wait for them. */
  readonly #attempts = new Set<Promise<void>>();
  #opened = false;
  #started = false;

  constructor({ db, logger, bus, pollMs }: JobServiceOptions) {
    this.#db = db;
    this.#bus = bus;
    this.#logger = logger.child({ component: 'jobs' });
    this.#pollSeconds = pollMs / 1000;
    // pg-boss takes 1 to 45 s for its schedule checks.
    const cronSeconds = Math.min(45, Math.max(1, Math.round(this.#pollSeconds)));
    this.#sql = sqlExecutor(db.orm.em as EntityManager, db);
    this.#boss = new PgBoss({
      db: this.#sql as PgBoss.Db,
      schema: JOBS_SCHEMA,
      pollingIntervalSeconds: this.#pollSeconds,
      cronMonitorIntervalSeconds: cronSeconds,
      cronWorkerIntervalSeconds: cronSeconds,
      maintenanceIntervalSeconds: 60,
    });
    this.#boss.on('error', (err) => this.#logger.error({ err }, 'job queue error'));
  }

  /** Takes the jobs of every plugin; called once, before `start`. */
  register(jobs: readonly RegisteredJob[]): void {
    for (const job of jobs) this.#jobs.set(`${job.pluginId}.${job.name}`, job);
  }

  /** Prepares the tables and queues, so plugins may enqueue from their start hooks. */
  async open(): Promise<void> {
    this.#opened = true;
    await this.#boss.start();
    for (const [queue, { definition }] of this.#jobs) {
      const retry = { ...DEFAULT_RETRY, ...definition.retry };
      const options = {
        name: queue,
        policy: 'short' as const,
        retryLimit: retry.limit,
        retryDelay: retry.delaySeconds,
        retryBackoff: retry.backoff,
        expireInSeconds: (definition.timeoutSeconds ?? DEFAULT_TIMEOUT_SECONDS) + EXPIRY_GRACE_SECONDS,
      };
      // "short": one waiting job per key; jobs without a key get their own id as key.
      if (await this.#boss.getQueue(queue)) await this.#boss.updateQueue(queue, options);
      else await this.#boss.createQueue(queue, options);
    }
    await this.#syncSchedules();
  }

  /**
   * Starts the workers: one per slot of each queue's concurrency, each
   * taking one job at a time, so a long job holds one slot and the next job
   * starts in another. Only the first slot polls at JOBS_POLL_MS; the others
   * wait to be woken, by an enqueue or by a sibling that found a job (more
   * may be due), and poll seldom, as a fallback.
   */
  async start(): Promise<void> {
    for (const [queue, registered] of this.#jobs) {
      // woken: told to look for an enqueued job; one that finds a job otherwise (a poll, a backlog) passes the word on.
      const workers = { ids: [] as string[], busy: new Set<string>(), woken: new Set<string>() };
      this.#workers.set(queue, workers);
      for (let slot = 0; slot < (registered.definition.concurrency ?? DEFAULT_CONCURRENCY); slot++) {
        const id: string = await this.#boss.work(
          queue,
          { batchSize: 1, includeMetadata: true, pollingIntervalSeconds: slot === 0 ? this.#pollSeconds : Math.max(this.#pollSeconds, SIBLING_POLL_SECONDS) },
          async (jobs: PgBoss.JobWithMetadata<Envelope>[]) => {
            workers.busy.add(id);
            if (!workers.woken.delete(id)) this.#notify(queue);
            try {
              // pg-boss completes the job with what this returns (with batches of one); a failed attempt is recorded by #run.
              return await this.#track(this.#attempt(queue, registered, jobs[0]!));
            } finally {
              workers.busy.delete(id);
              // More may be due: look again at once instead of after a polling interval.
              this.#boss.notifyWorker(id);
            }
          },
        );
        workers.ids.push(id);
      }
    }
    this.#unsubscribe.push(
      // This node's own wake-ups were acted on when sent.
      this.#bus.subscribe(JOBS_WAKE, (event) => void (event.origin !== this.#bus.nodeId && this.#notify((event.payload as { queue: string }).queue))),
      // Wake-ups sent while this node was not listening are lost: look at every queue.
      this.#bus.subscribe(BUS_RESYNC, () => this.#workers.forEach((_, queue) => this.#notify(queue))),
    );
    this.#started = true;
  }

  /** Stops taking jobs and lets running ones finish within `timeoutMs`; those still running are retried later. */
  async stop(timeoutMs: number): Promise<void> {
    if (!this.#opened) return;
    this.#opened = false;
    this.#started = false;
    for (const unsubscribe of this.#unsubscribe.splice(0)) unsubscribe();
    const deadline = Date.now() + timeoutMs;
    await this.#boss.stop({ graceful: true, wait: true, close: false, timeout: timeoutMs });
    await this.#settle(deadline);
  }

  /**
   * pg-boss's stop returns while some of its work goes on: a fetch already sent
   * hands its jobs to the handler, and timers already fired go on to their next
   * statements. Waits until neither an attempt nor a statement is left, looking
   * again after each turn of the event loop, so the database is not closed under them.
   */
  async #settle(deadline: number): Promise<void> {
    while (Date.now() < deadline) {
      let timer: NodeJS.Timeout | undefined;
      await Promise.race([Promise.all([...this.#attempts, this.#sql.drain()]), new Promise((resolve) => (timer = setTimeout(resolve, deadline - Date.now())))]);
      clearTimeout(timer);
      await new Promise((resolve) => setImmediate(resolve));
      if (this.#attempts.size === 0 && this.#sql.idle()) return;
    }
  }

  /** Kept as a promise that never rejects: a failed attempt must not make a stop throw before the database closes. */
  #track<T>(attempt: Promise<T>): Promise<T> {
    const settled = attempt.then(ignore, ignore);
    this.#attempts.add(settled);
    void settled.then(() => this.#attempts.delete(settled));
    return attempt;
  }

  /** The view a plugin receives as its `jobs` dep: its own jobs by their short names. */
  forPlugin(pluginId: string): Jobs {
    const full = (name: string) => `${pluginId}.${name}`;
    return {
      enqueue: (name, data, options) => this.enqueue(full(name), data, options),
      get: (name, id) => this.get(full(name), id),
      cancel: (name, id) => this.cancel(full(name), id),
    };
  }

  async enqueue(name: string, data: unknown, options: EnqueueOptions = {}): Promise<string | null> {
    const { definition } = this.#registered(name);
    const parsed = v.safeParse(definition.data, data);
    if (!parsed.success) {
      throw new TypeError(`Job "${name}": data does not match its schema: ${parsed.issues.map((issue) => issue.message).join('; ')}`);
    }
    const id = randomUUID();
    const principal = principalOf(options.ctx);
    const envelope: Envelope = { data: parsed.output, principal, subscriptionId: principal?.subscriptionId ?? options.subscriptionId ?? null };
    if (tracingOn()) envelope.traceparent = currentTraceparent();
    const startAfter = options.runAt ?? (options.delaySeconds ? new Date(Date.now() + options.delaySeconds * 1000) : undefined);
    const sent = await this.#boss.send(name, envelope as object, {
      id,
      singletonKey: options.key ?? id,
      ...(startAfter ? { startAfter } : {}),
      ...(options.em ? { db: sqlExecutor(options.em, this.#db) as PgBoss.Db } : {}),
    });
    // A job that may start now starts at once on whichever node is free, once its transaction (if any) has committed.
    if (sent && !startAfter) {
      if (options.em) afterCommit(options.em, () => this.#wake(name));
      else this.#wake(name);
    }
    return sent;
  }

  async get(name: string, id: string): Promise<JobView | null> {
    this.#registered(name);
    const job = (await this.#boss.getJobById(name, id)) as (PgBoss.JobWithMetadata<Envelope> & { output: unknown }) | null;
    return job ? viewOf(job) : null;
  }

  async cancel(name: string, id: string): Promise<boolean> {
    this.#registered(name);
    const job = await this.get(name, id);
    if (!job || !['waiting', 'retrying', 'running'].includes(job.state)) return false;
    await this.#boss.cancel(name, id);
    return true;
  }

  #registered(name: string): RegisteredJob {
    const registered = this.#jobs.get(name);
    if (!registered) throw new TypeError(`No job "${name}" is defined; a plugin enqueues only the jobs of its definition`);
    return registered;
  }

  /** Tells one idle worker of the queue on this node, if any, to look for a job now; true when it found one not already told. */
  #notify(queue: string): boolean {
    const workers = this.#workers.get(queue);
    if (!this.#started || !workers) return false;
    const fresh = workers.ids.find((id) => !workers.busy.has(id) && !workers.woken.has(id));
    const idle = fresh ?? workers.ids.find((id) => !workers.busy.has(id));
    if (!idle) return false;
    workers.woken.add(idle);
    this.#boss.notifyWorker(idle);
    return fresh !== undefined;
  }

  /** Starts the job at once on this node, or else on another (through the bus): a NOTIFY for a job this node takes would send others to look for nothing. */
  #wake(queue: string): void {
    if (this.#notify(queue)) return;
    this.#bus.publish({ name: JOBS_WAKE, payload: { queue } }).catch((err) => this.#logger.warn({ err, queue }, 'could not wake the job workers'));
  }

  /** One attempt in a span of the trace that enqueued the job (a new trace for a scheduled one). */
  #attempt(queue: string, registered: RegisteredJob, job: PgBoss.JobWithMetadata<Envelope>): Promise<Completion | undefined> {
    const { traceparent } = job.data;
    return inSpan(
      {
        name: `job ${queue}`,
        kind: SpanKind.CONSUMER,
        attributes: { 'job.name': queue, 'job.id': job.id, 'job.attempt': job.retryCount + 1 },
        parent: remoteParent(traceparent ? { traceparent } : {}),
      },
      () => this.#run(queue, registered, job),
    );
  }

  /** One attempt: the handler with its time limit, then the outcome recorded for this job alone. */
  async #run(queue: string, registered: RegisteredJob, job: PgBoss.JobWithMetadata<Envelope>): Promise<Completion | undefined> {
    const { definition } = registered;
    const timeoutSeconds = definition.timeoutSeconds ?? DEFAULT_TIMEOUT_SECONDS;
    const controller = new AbortController();
    const ctx = createContext({ forkEm: (id) => this.#db.forkEm(id), logger: this.#logger }, `job:${job.id}`, job.data.principal);
    const run: JobRun = { id: job.id, name: queue, attempt: job.retryCount + 1, signal: controller.signal };
    let timer: NodeJS.Timeout | undefined;
    try {
      const output = await Promise.race([
        Promise.resolve().then(() => definition.handler({ data: job.data.data, ctx, deps: registered.deps, job: run })),
        new Promise<never>((_, reject) => {
          timer = setTimeout(() => {
            controller.abort();
            reject(new Error(`timed out after ${timeoutSeconds} s`));
          }, timeoutSeconds * 1000);
        }),
      ]);
      return { result: output ?? null };
    } catch (error) {
      // The message is stored with the job: a database error's is kept without the values of its statement.
      const message = error instanceof Error ? String((isDatabaseError(error) ? databaseErrorRecord(error) : error).message) : String(error);
      this.#logger.warn({ job: queue, jobId: job.id, attempt: run.attempt, err: error }, 'job attempt failed');
      failActiveSpan(error);
      await this.#boss.fail(queue, job.id, { message });
      await this.#capRetryDelay(queue, job.id, { ...DEFAULT_RETRY, ...definition.retry }.maxDelaySeconds);
    } finally {
      clearTimeout(timer);
    }
  }

  /** pg-boss doubles the wait without a ceiling of its own; this keeps it at most `maxDelaySeconds`. */
  async #capRetryDelay(queue: string, id: string, maxDelaySeconds: number): Promise<void> {
    await this.#db.execute(
      `update ${JOBS_SCHEMA}.job set start_after = least(start_after, now() + make_interval(secs => ?))
       where name = ? and id = ? and state = 'retry'`,
      [maxDelaySeconds, queue, id],
    );
  }

  /** Schedules each job that declares one, and removes schedules no loaded plugin declares any more. */
  async #syncSchedules(): Promise<void> {
    const wanted = new Map([...this.#jobs].filter(([, job]) => job.definition.schedule).map(([queue, job]) => [queue, job.definition.schedule!]));
    for (const schedule of await this.#boss.getSchedules()) {
      if (!wanted.has(schedule.name)) await this.#boss.unschedule(schedule.name);
    }
    const envelope: Envelope = { data: {}, principal: null };
    for (const [queue, cron] of wanted) await this.#boss.schedule(queue, cron, envelope as object, { tz: 'UTC' });
  }

  // One subscription's view of the queue (JobQueue, for JobQueueRpc). pg-boss keeps no subscription column: the envelope's
  // subscriptionId is read from the job's data. Unindexed, but pg-boss keeps the table to recent jobs (it archives finished ones).

  async getCounts(subscriptionId: string): Promise<QueueCounts[]> {
    const rows = await this.#db.execute<{ name: string; state: string; count: number }>(
      `select name, state::text as state, count(*)::int as count from ${JOBS_SCHEMA}.job where data->>'subscriptionId' = ? group by name, state`,
      [subscriptionId],
    );
    return countsByQueue(rows, []);
  }

  async listJobs(
    subscriptionId: string,
    { state, queue, offset, limit }: { state?: JobState; queue?: string; offset: number; limit: number },
  ): Promise<{ jobs: SubscriptionJob[]; total: number }> {
    const parts = [`data->>'subscriptionId' = ?`];
    const params: unknown[] = [subscriptionId];
    if (state) {
      parts.push('state::text = ?');
      params.push(BOSS_STATES[state]);
    }
    if (queue) {
      parts.push('name = ?');
      params.push(queue);
    }
    const where = parts.join(' and ');
    const rows = await this.#db.execute<JobRow>(
      `select id, name, state::text as state, retry_count, start_after, created_on, started_on, completed_on, output
       from ${JOBS_SCHEMA}.job where ${where} order by created_on desc, id limit ? offset ?`,
      [...params, limit, offset],
    );
    const [{ total }] = await this.#db.execute<{ total: number }>(`select count(*)::int as total from ${JOBS_SCHEMA}.job where ${where}`, params);
    return { jobs: rows.map(subscriptionJobOf), total };
  }

  async retryJob(subscriptionId: string, id: string): Promise<boolean> {
    return (await this.retryFailed({ id, subscriptionId })) > 0;
  }

  // Administration of the queue, for `rpc-service jobs` (core/operator/jobs.ts). Jobs of every subscription: pg-boss's
  // tables carry no subscription, so these read them across tenants, and show no job's data, which may be a tenant's content.

  /** Jobs per queue and state, every queue listed (with zeros). */
  async queueCounts(): Promise<QueueCounts[]> {
    // pg-boss 10 counts one queue before a state (getQueueSize); its countStates, all queues by state, is not in its API.
    const rows = await this.#db.execute<{ name: string; state: string; count: number }>(
      `select name, state::text as state, count(*)::int as count from ${JOBS_SCHEMA}.job group by name, state`,
    );
    return countsByQueue(
      rows,
      (await this.#boss.getQueues()).map((queue) => queue.name),
    );
  }

  /** The dead jobs that failed last, newest first. */
  async failedJobs({ queue, limit }: { queue?: string; limit: number }): Promise<FailedJob[]> {
    // pg-boss 10 finds jobs by id only.
    const rows = await this.#db.execute<{ id: string; name: string; completed_on: Date | string; output: unknown }>(
      `select id, name, completed_on, output from ${JOBS_SCHEMA}.job
       where state = 'failed' ${queue ? 'and name = ?' : ''} order by completed_on desc limit ?`,
      queue ? [queue, limit] : [limit],
    );
    return rows.map((row) => ({ id: row.id, queue: row.name, failedAt: iso(row.completed_on)!, error: lastErrorOf(row.output) }));
  }

  /** Puts dead jobs back in their queue, to run at once: one by id (of a subscription), or every one (of a queue); how many were. */
  async retryFailed(which: { id: string; subscriptionId?: string } | { queue?: string }): Promise<number> {
    const conditions = [`state = 'failed'`];
    const params: unknown[] = [];
    const where = (condition: string, value: unknown) => (conditions.push(condition), params.push(value));
    if ('id' in which) where('id = ?', which.id);
    if ('id' in which && which.subscriptionId) where(`data->>'subscriptionId' = ?`, which.subscriptionId);
    if ('queue' in which && which.queue) where('name = ?', which.queue);
    const rows = await this.#db.execute<{ id: string; name: string }>(`select id, name from ${JOBS_SCHEMA}.job where ${conditions.join(' and ')}`, params);
    const byQueue = new Map<string, string[]>();
    for (const row of rows) byQueue.set(row.name, [...(byQueue.get(row.name) ?? []), row.id]);
    let retried = 0;
    for (const [queue, ids] of byQueue) {
      // pg-boss's retry gives each job one more attempt than its limit; its typing leaves out the count it answers.
      const result = (await this.#boss.retry(queue, ids)) as unknown as { affected: number };
      retried += result.affected;
      this.#wake(queue);
    }
    return retried;
  }

  /**
   * Deletes the finished jobs in one state, of every queue or one, that
   * finished more than `olderThanSeconds` ago, from the queue and from the
   * archive pg-boss moves them to after a while; how many. In batches, each
   * reported, so a large purge holds no long lock.
   */
  async purgeFinished(
    { state, queue, olderThanSeconds = 0 }: { state: 'done' | 'dead'; queue?: string; olderThanSeconds?: number },
    progress: (deleted: number, total: number) => void = () => undefined,
  ): Promise<number> {
    // pg-boss's deleteJob takes the ids of one queue and leaves its archive alone: one statement a batch does both by state and age.
    const where = `state = '${state === 'done' ? 'completed' : 'failed'}' and completed_on < now() - make_interval(secs => ?) ${queue ? 'and name = ?' : ''}`;
    const params = queue ? [olderThanSeconds, queue] : [olderThanSeconds];
    const tables = [`${JOBS_SCHEMA}.job`, `${JOBS_SCHEMA}.archive`];
    const [{ total }] = await this.#db.execute<{ total: number }>(
      `select (${tables.map((table) => `(select count(*) from ${table} where ${where})`).join(' + ')})::int as total`,
      [...params, ...params],
    );
    let deleted = 0;
    progress(deleted, total);
    for (const table of tables) {
      for (;;) {
        const [{ count }] = await this.#db.execute<{ count: number }>(
          `with gone as (delete from ${table} where (name, id) in (select name, id from ${table} where ${where} limit ${PURGE_BATCH}) returning 1)
           select count(*)::int as count from gone`,
          params,
        );
        deleted += count;
        progress(deleted, Math.max(total, deleted));
        if (count < PURGE_BATCH) break;
      }
    }
    return deleted;
  }
}

const ignore = () => undefined;

/** Jobs deleted by one statement of a purge. */
const PURGE_BATCH = 1000;

function principalOf(ctx: RequestContext | undefined): Principal | null {
  if (!ctx?.subscriptionId || !ctx.userId || !ctx.role) return null;
  return {
    subscriptionId: ctx.subscriptionId,
    userId: ctx.userId,
    role: ctx.role,
    apiKeyId: ctx.apiKeyId,
    sessionId: ctx.sessionId,
    initialContext: { ...ctx.extra },
    // A job of a scoped or read-only key does no more than the key could.
    ...(ctx.limits ? { limits: ctx.limits } : {}),
  };
}

function viewOf(job: PgBoss.JobWithMetadata<Envelope> & { output: unknown }): JobView {
  const progress = progressOf(job.state, job.retryCount, job.startedOn, job.output);
  return {
    id: job.id,
    name: job.name,
    ...progress,
    data: job.data.data,
    output: progress.state === 'done' ? ((job.output as { result?: unknown } | null)?.result ?? null) : null,
    runAt: iso(job.startAfter)!,
    createdAt: iso(job.createdOn)!,
    startedAt: iso(job.startedOn),
    finishedAt: iso(job.completedOn),
  };
}
