import { randomUUID } from 'node:crypto';
import * as v from 'valibot';
import {
  actingPrincipal,
  defineRecord,
  GroupWrite,
  pgArray,
  RpcError,
  type AiClient,
  type AuthenticatedContext,
  type Author,
  type Database,
  type EventBus,
  type InferRecord,
  type Logger,
  type OperationCaller,
  type PluginServices,
  type Principal,
  type RowOf,
} from 'rpc-service/plugin';
import type { ActionConfig } from './actions.ts';
import type { SchedulerConfig } from './config.ts';
import { RUN_STATUSES, TaskRun, type RunStatus } from './run.entity.ts';
import { nextRunOf, parseSchedule } from './schedule.ts';
import { ACTION_TYPES, ScheduledTask, type ActionType, type TaskContext } from './task.entity.ts';

/** Due tasks claimed per transaction. */
const CLAIM_BATCH = 100;
/** The soonest a node looks again for due tasks, when one is already due (another node is claiming it). */
const MIN_LOOK_MS = 20;
/** A result kept with a run at most this long (as JSON); larger ones are left out. */
const MAX_RESULT = 10_000;

interface DueTask {
  id: string;
  subscription_id: string;
  user_id: string;
  name: string;
  action_type: ActionType;
  action_config: Record<string, unknown> | string;
  context: TaskContext | string;
  authors: Author[] | string;
}

interface Claimed {
  runId: string;
  task: DueTask;
}

/** How a run ended, as its row keeps it; `firedAt` is when its action started. */
interface Outcome {
  subscriptionId: string;
  runId: string;
  status: RunStatus;
  error: string | null;
  result: string | null;
  firedAt: Date;
}

const RUN = defineRecord(TaskRun, { hide: ['subscriptionId'] });

/** A run also says how late it fired. */
export type RunRecord = InferRecord<typeof RUN> & { delayMs: number };

/** The declared result of an answer with a run: RUN's columns and delayMs. */
export const RUN_SCHEMA = v.strictObject({
  ...RUN.entries,
  // Enumerations the view knows as text.
  actionType: v.picklist(ACTION_TYPES),
  status: v.picklist(RUN_STATUSES),
  delayMs: v.number(),
});

const json = <T>(value: T | string): T => (typeof value === 'string' ? (JSON.parse(value) as T) : value);

const toRecord = (run: TaskRun): RunRecord => ({ ...RUN.toRecord(run), delayMs: run.firedAt.getTime() - run.scheduledFor.getTime() });

/**
 * Fires due tasks. Every node looks for them every SCHEDULER_POLL_MS and
 * claims a batch in one transaction (`for update skip locked`, so two nodes
 * never claim the same task): each claimed task gets its next run (a cron
 * task's next time after now, so a task that missed several runs while the
 * service was down fires once; a `once:` task none) and a run row, then its
 * action runs as the task's user, with that user's current role. A run its
 * node never finished is fired again by the recovery job.
 */
export class SchedulerRunner {
  readonly #db: Database;
  readonly #bus: EventBus;
  readonly #operations: OperationCaller;
  readonly #ai: AiClient;
  readonly #notifications: PluginServices['notificationService'];
  readonly #users: PluginServices['userService'];
  readonly #config: SchedulerConfig;
  readonly #logger: Logger;
  readonly #inFlight = new Set<Promise<void>>();
  /** Runs' outcomes, written together when they arrive together. */
  readonly #outcomes: GroupWrite<Outcome>;
  /** The role and state of each task's user, looked up once per tick (a tick lasts as long as due tasks are left). */
  #holders = new Map<string, ReturnType<PluginServices['userService']['credentialHolder']>>();
  #timer: NodeJS.Timeout | undefined;
  #stopped = true;

  constructor(deps: {
    db: Database;
    bus: EventBus;
    operations: OperationCaller;
    ai: AiClient;
    notificationService: PluginServices['notificationService'];
    userService: PluginServices['userService'];
    config: SchedulerConfig;
    logger: Logger;
  }) {
    this.#db = deps.db;
    this.#bus = deps.bus;
    this.#operations = deps.operations;
    this.#ai = deps.ai;
    this.#notifications = deps.notificationService;
    this.#users = deps.userService;
    this.#config = deps.config;
    this.#logger = deps.logger;
    this.#outcomes = new GroupWrite((outcomes) =>
      this.#db.execute(
        `update scheduler_run set status = v.status, error = v.error, result = v.result::jsonb, fired_at = v.fired_at, finished_at = now()
         from unnest(?::uuid[], ?::uuid[], ?::text[], ?::text[], ?::text[], ?::timestamptz[]) as v(subscription_id, id, status, error, result, fired_at)
         where scheduler_run.subscription_id = v.subscription_id and scheduler_run.id = v.id and scheduler_run.status = 'running'`,
        [
          pgArray(outcomes.map((outcome) => outcome.subscriptionId)),
          pgArray(outcomes.map((outcome) => outcome.runId)),
          pgArray(outcomes.map((outcome) => outcome.status)),
          pgArray(outcomes.map((outcome) => outcome.error)),
          pgArray(outcomes.map((outcome) => outcome.result)),
          pgArray(outcomes.map((outcome) => outcome.firedAt.toISOString())),
        ],
      ),
    );
  }

  start(): void {
    this.#stopped = false;
    this.#schedule();
  }

  /** Stops looking for due tasks and waits (up to `timeoutMs`) for the actions under way. */
  async stop(timeoutMs: number): Promise<void> {
    this.#stopped = true;
    clearTimeout(this.#timer);
    let timer: NodeJS.Timeout | undefined;
    await Promise.race([Promise.allSettled([...this.#inFlight]), new Promise((resolve) => (timer = setTimeout(resolve, timeoutMs)))]);
    clearTimeout(timer);
  }

  /**
   * Runs as the caller may read them: an admin, every run of the subscription;
   * anyone else, the runs of tasks acting as them. A run's result is what its
   * action read with the rights of the user it acted as (an admin's task may
   * have read a secret), so other members do not see it.
   */
  async listRuns(ctx: AuthenticatedContext, query: { taskId?: string; status?: RunStatus; page: number; pageSize: number }) {
    const own = ctx.role === 'admin' ? null : (await ctx.em.find(ScheduledTask, { userId: ctx.userId }, { fields: ['id'] })).map((task) => task.id);
    const taskIds = own === null ? (query.taskId ? [query.taskId] : null) : query.taskId ? own.filter((id) => id === query.taskId) : own;
    const where = { ...(taskIds ? { taskId: { $in: taskIds } } : {}), ...(query.status ? { status: query.status } : {}) };
    const [runs, totalCount] = await ctx.em.findAndCount(TaskRun, where, {
      orderBy: { firedAt: 'desc', id: 'asc' },
      limit: query.pageSize,
      offset: (query.page - 1) * query.pageSize,
    });
    return { data: runs.map(toRecord), totalCount };
  }

  /**
   * The recovery job: runs left unfinished past SCHEDULER_RUN_LEASE_MS (their
   * node stopped) are fired again, up to SCHEDULER_MAX_ATTEMPTS times in all;
   * a run whose action stopped its node that often fails instead (a task that
   * takes its node down would otherwise do so at every start).
   */
  async recover(): Promise<{ refired: number; failed: number }> {
    const em = this.#db.forkEm(null);
    const max = this.#config.SCHEDULER_MAX_ATTEMPTS;
    const given = await em.execute<{ id: string }[]>(
      `update scheduler_run set status = 'failed', finished_at = now(),
         error = 'its node stopped each of the ' || attempts || ' times it was fired, so it is not fired again (SCHEDULER_MAX_ATTEMPTS)'
       where id in (select id from scheduler_run where status = 'running' and attempts >= ? and fired_at < now() - make_interval(secs => ?) limit 100 for update skip locked)
       returning id`,
      [max, this.#config.SCHEDULER_RUN_LEASE_MS / 1000],
    );
    const stale = await em.execute<RowOf<TaskRun, 'id' | 'subscriptionId' | 'taskId'>[]>(
      `update scheduler_run set attempts = attempts + 1, fired_at = now()
       where id in (select id from scheduler_run where status = 'running' and attempts < ? and fired_at < now() - make_interval(secs => ?) order by fired_at limit 100 for update skip locked)
       returning id, subscription_id, task_id`,
      [max, this.#config.SCHEDULER_RUN_LEASE_MS / 1000],
    );
    for (const run of stale) {
      const [task] = await em.execute<DueTask[]>(
        'select id, subscription_id, user_id, name, action_type, action_config, context, authors from scheduler_task where subscription_id = ? and id = ?',
        [run.subscription_id, run.task_id],
      );
      if (task) this.#launch({ runId: run.id, task });
      else await this.#finish(run.subscription_id, run.id, 'failed', 'the task was deleted', null, new Date());
    }
    return { refired: stale.length, failed: given.length };
  }

  #schedule(delayMs = this.#config.SCHEDULER_POLL_MS): void {
    if (this.#stopped) return;
    this.#timer = setTimeout(() => void this.#tick().then((next) => this.#schedule(next)), delayMs);
  }

  /**
   * When to look next: at the next task's due time when that comes before
   * the next poll, so a task fires on time rather than up to a polling
   * interval late. A task made or changed meanwhile is found by the poll.
   */
  async #nextLook(): Promise<number> {
    const poll = this.#config.SCHEDULER_POLL_MS;
    try {
      const [row] = await this.#db.execute<{ due_in_ms: number | string | null }>(
        'select extract(epoch from min(next_run) - clock_timestamp()) * 1000 as due_in_ms from scheduler_task where enabled and next_run is not null',
      );
      const dueIn = row?.due_in_ms === null || row?.due_in_ms === undefined ? poll : Number(row.due_in_ms);
      // Not at once for a task already due: another node is claiming it.
      return Math.min(poll, Math.max(MIN_LOOK_MS, Math.ceil(dueIn)));
    } catch (err) {
      this.#logger.error({ err }, 'could not find when the next scheduled task is due');
      return poll;
    }
  }

  /**
   * Claims and fires due tasks until none is left, keeping at most
   * SCHEDULER_CONCURRENCY actions under way. The next batch is claimed while
   * the actions of this one start, so the actions never wait for a claim.
   */
  async #tick(): Promise<number> {
    this.#holders = new Map();
    try {
      for (let next: Promise<Claimed[]> | null = this.#claim(); next;) {
        const batch: Claimed[] = await next;
        next = batch.length === CLAIM_BATCH && !this.#stopped ? this.#claim() : null;
        // Awaited on the next turn of the loop: until then a failed claim must not count as unhandled.
        next?.catch(() => undefined);
        for (const run of batch) {
          while (this.#inFlight.size >= this.#config.SCHEDULER_CONCURRENCY) await Promise.race(this.#inFlight);
          this.#launch(run);
        }
      }
    } catch (err) {
      this.#logger.error({ err }, 'could not claim due scheduled tasks');
    }
    return this.#nextLook();
  }

  /** In one transaction: the due tasks no other node holds, their next runs, and a run row each. */
  async #claim(): Promise<Claimed[]> {
    return this.#db.forkEm(null).transactional(async (tx) => {
      const due = await tx.execute<(DueTask & { schedule: string; time_zone: string | null; next_run: Date | string })[]>(
        `select id, subscription_id, user_id, name, schedule, time_zone, action_type, action_config, context, authors, next_run from scheduler_task
         where enabled and next_run <= now() order by next_run limit ${CLAIM_BATCH} for update skip locked`,
      );
      if (due.length === 0) return [];
      const firedAt = new Date();
      const next = due.map((task) => {
        try {
          return nextRunOf(parseSchedule(task.schedule, task.time_zone), firedAt, firedAt)?.toISOString() ?? null;
        } catch {
          // A schedule that no longer reads (a time zone gone from the system): fired now, then not again.
          return null;
        }
      });
      await tx.execute(
        `update scheduler_task set next_run = v.next_run, last_run = ?
         from unnest(?::uuid[], ?::uuid[], ?::timestamptz[]) as v(subscription_id, id, next_run)
         where scheduler_task.subscription_id = v.subscription_id and scheduler_task.id = v.id`,
        [firedAt, pgArray(due.map((task) => task.subscription_id)), pgArray(due.map((task) => task.id)), pgArray(next)],
      );
      const claimed = due.map((task) => ({ runId: randomUUID(), task }));
      await tx.execute(
        `insert into scheduler_run (id, subscription_id, task_id, task_name, action_type, scheduled_for, fired_at, status, attempts)
         select r.id, r.subscription_id, r.task_id, r.task_name, r.action_type, r.scheduled_for, ?, 'running', 1
         from unnest(?::uuid[], ?::uuid[], ?::uuid[], ?::text[], ?::text[], ?::timestamptz[]) as r(id, subscription_id, task_id, task_name, action_type, scheduled_for)`,
        [
          firedAt,
          pgArray(claimed.map((run) => run.runId)),
          pgArray(due.map((task) => task.subscription_id)),
          pgArray(due.map((task) => task.id)),
          pgArray(due.map((task) => task.name)),
          pgArray(due.map((task) => task.action_type)),
          pgArray(due.map((task) => new Date(task.next_run).toISOString())),
        ],
      );
      return claimed;
    });
  }

  #launch(run: Claimed): void {
    const firing: Promise<void> = this.#fire(run)
      .catch((err) => this.#logger.error({ err, runId: run.runId }, 'a scheduled run could not be recorded'))
      .finally(() => this.#inFlight.delete(firing));
    this.#inFlight.add(firing);
  }

  /** Runs a task's action as the weakest of those who shaped it and records how it went, and when it started. */
  async #fire({ runId, task }: Claimed): Promise<void> {
    const firedAt = new Date();
    const finish = (status: RunStatus, error: string | null, result: unknown) => this.#finish(task.subscription_id, runId, status, error, result, firedAt);
    try {
      const principal = await this.#principal(task);
      const result = await this.#act(task, principal, json(task.action_config));
      await finish('succeeded', null, result);
    } catch (error) {
      const message = error instanceof RpcError ? `${error.code}: ${error.message}` : 'the action failed';
      if (!(error instanceof RpcError)) this.#logger.error({ err: error, runId, taskId: task.id }, 'a scheduled action failed');
      await finish('failed', message, null);
    }
  }

  /** `saved` is the task's actionConfig, checked against its action type's schema (actions.ts) when the task was saved. */
  async #act(task: DueTask, principal: Principal, saved: Record<string, unknown>): Promise<unknown> {
    const caller = this.#operations.as(principal);
    switch (task.action_type) {
      case 'event': {
        const config = saved as ActionConfig<'event'>;
        await this.#bus.publish({ name: config.eventName, payload: config.eventData ?? {}, subscriptionId: task.subscription_id, tenantDefined: true });
        return null;
      }
      case 'rpc': {
        const config = saved as ActionConfig<'rpc'>;
        return caller.call(config.method, config.params ?? {});
      }
      case 'workflow': {
        const config = saved as ActionConfig<'workflow'>;
        return caller.call('WorkflowRpc.executeWorkflow', { workflowIdentifier: config.workflowIdentifier, workflowArgs: config.workflowArgs ?? {} });
      }
      case 'aiMessage': {
        const config = saved as ActionConfig<'aiMessage'>;
        const agents = await caller.call<{ data: { name: string; model: string; promptText: string | null }[] }>('AgentConfigRpc.getData', {
          filter: { name: config.agentName },
          pageSize: 1,
        });
        const agent = agents.data[0];
        if (!agent) throw new RpcError('NOT_FOUND', `No agent named ${config.agentName}`);
        const ctx = this.#operations.contextOf(principal, `scheduler:${task.id}`);
        const messages = [
          ...(agent.promptText ? [{ role: 'system' as const, content: agent.promptText }] : []),
          { role: 'user' as const, content: config.message },
        ];
        const answer = await this.#ai.chat(ctx, messages, { model: agent.model, caller: { type: 'scheduler', name: task.name } });
        await this.#notifications.notify({
          subscriptionId: task.subscription_id,
          userIds: [task.user_id],
          title: `${agent.name} answered (${task.name})`,
          message: answer.content,
          source: 'scheduler',
          data: { taskId: task.id, agentName: agent.name },
        });
        return { agentName: agent.name, answer: answer.content };
      }
    }
  }

  #finish(subscriptionId: string, runId: string, status: RunStatus, error: string | null, result: unknown, firedAt: Date): Promise<void> {
    const text = result === undefined || result === null ? null : JSON.stringify(result);
    return this.#outcomes.add({ subscriptionId, runId, status, error, result: text !== null && text.length <= MAX_RESULT ? text : null, firedAt });
  }

  /**
   * The caller the task acts as: of the user it acts for and everyone who
   * saved it, the one with the fewest rights now, under every key limit they
   * saved it with (rpc-service/plugin's actingPrincipal). FORBIDDEN when one
   * of them is gone or inactive.
   */
  #principal(task: DueTask): Promise<Principal> {
    const context = json(task.context);
    const initialContext = {
      ...(context.projectId ? { projectId: context.projectId } : {}),
      ...(context.serviceCode ? { serviceCode: context.serviceCode } : {}),
    };
    return actingPrincipal(
      task.subscription_id,
      [{ userId: task.user_id }, ...json(task.authors)],
      (userId) => this.#holder(task.subscription_id, userId),
      initialContext,
    );
  }

  /** A user's role and state, looked up once per tick. */
  #holder(subscriptionId: string, userId: string): ReturnType<PluginServices['userService']['credentialHolder']> {
    const key = `${subscriptionId}:${userId}`;
    let lookup = this.#holders.get(key);
    if (!lookup) {
      this.#holders.set(key, (lookup = this.#users.credentialHolder(subscriptionId, userId)));
      lookup.catch(() => this.#holders.delete(key));
    }
    return lookup;
  }
}
