import { randomUUID } from 'node:crypto';
import * as v from 'valibot';
import {
  authorOf,
  defineRecord,
  forbidden,
  mayChangeRecordOf,
  notFound,
  toOrderBy,
  toWhere,
  validationError,
  withAuthor,
  type AuthenticatedContext,
  type EntityManager,
  type EventBus,
  type InferRecord,
  type ListEnvelope,
  type ListQuery,
  type PluginServices,
  type ValidationIssue,
} from 'rpc-service/plugin';
import { ACTION_CONFIGS } from './actions.ts';
import { nextRunOf, parseSchedule, scheduleProblem } from './schedule.ts';
import { ACTION_TYPES, CATEGORIES, ScheduledTask, type ActionType, type Category, type TaskContext } from './task.entity.ts';

/** The context a task is given: whom it acts as, in which subscription, for which service and project. */
export interface ContextInput {
  userId?: string;
  subscriptionId?: string;
  serviceCode?: string;
  projectId?: string;
}

export interface TaskConfig {
  name?: string;
  description?: string | null;
  schedule?: string;
  actionType?: ActionType;
  actionConfig?: Record<string, unknown>;
  context?: ContextInput;
  category?: Category;
  tags?: string[];
  enabled?: boolean;
  timeZone?: string | null;
}

const VIEW = defineRecord(ScheduledTask, { hide: ['subscriptionId', 'context', 'authors'], filterOnly: ['userId'] });

/** The task's context holds the user it acts as and its subscription, kept as columns of their own. */
export type TaskRecord = InferRecord<typeof VIEW> & { context: TaskContext & { userId: string; subscriptionId: string } };

/** The declared result of an answer with a task: VIEW's columns and the context. */
export const TASK_SCHEMA = v.strictObject({
  ...VIEW.entries,
  // Enumerations the view knows as text.
  actionType: v.picklist(ACTION_TYPES),
  category: v.picklist(CATEGORIES),
  // A JSON column to the view: always an object, its shape by actionType (ACTION_CONFIGS).
  actionConfig: v.record(v.string(), v.unknown()),
  context: v.strictObject({ userId: v.string(), subscriptionId: v.string(), serviceCode: v.optional(v.string()), projectId: v.optional(v.string()) }),
});

const toRecord = (task: ScheduledTask): TaskRecord => ({
  ...VIEW.toRecord(task),
  context: { ...task.context, userId: task.userId, subscriptionId: task.subscriptionId },
});

/**
 * Scheduled tasks of a subscription: their schedule (cron with a time zone,
 * or once at a time) checked with croner when saved, their action config
 * checked by action type, and the user they act as kept to the caller's
 * subscription. `nextRun` is computed whenever the schedule or the state
 * changes.
 */
export class SchedulerService {
  readonly #users: PluginServices['userService'];
  readonly #bus: EventBus;

  constructor({ userService, bus }: { userService: PluginServices['userService']; bus: EventBus }) {
    this.#users = userService;
    this.#bus = bus;
  }

  async create(
    ctx: AuthenticatedContext,
    config: TaskConfig & Required<Pick<TaskConfig, 'name' | 'schedule' | 'actionType' | 'actionConfig'>>,
    callerContext?: ContextInput,
  ): Promise<string> {
    const actionConfig = this.#checkAction(config.actionType, config.actionConfig);
    const timeZone = config.timeZone ?? null;
    this.#checkSchedule(config.schedule, timeZone);
    const context = { ...callerContext, ...config.context };
    const userId = await this.#actingUser(ctx, context);
    const now = new Date();
    const enabled = config.enabled ?? true;
    const task = ctx.em.create(ScheduledTask, {
      id: randomUUID(),
      subscriptionId: ctx.subscriptionId,
      userId,
      createdBy: ctx.userId,
      authors: [authorOf(ctx)],
      name: config.name,
      description: config.description ?? null,
      schedule: config.schedule,
      timeZone,
      actionType: config.actionType,
      actionConfig,
      context: contextOf(context, ctx),
      category: config.category ?? 'user',
      tags: config.tags ?? [],
      enabled,
      nextRun: enabled ? nextRunOf(parseSchedule(config.schedule, timeZone), now, null) : null,
      lastRun: null,
      createdAt: now,
      updatedAt: now,
    });
    await ctx.em.flush();
    return task.id;
  }

  /** Changes the fields given; the whole task is checked again, and its next run computed again when its schedule changed. */
  async update(ctx: AuthenticatedContext, id: string, config: TaskConfig): Promise<true> {
    const task = await this.#changeable(ctx, ctx.em, id);
    const actionType = config.actionType ?? task.actionType;
    const actionConfig =
      config.actionConfig !== undefined || config.actionType !== undefined
        ? this.#checkAction(actionType, config.actionConfig ?? task.actionConfig, 'updatedConfig')
        : task.actionConfig;
    const schedule = config.schedule ?? task.schedule;
    const timeZone = config.timeZone === undefined ? (task.timeZone ?? null) : config.timeZone;
    this.#checkSchedule(schedule, timeZone, 'updatedConfig');
    if (config.context !== undefined) {
      task.userId = await this.#actingUser(ctx, { userId: task.userId, ...config.context }, 'updatedConfig');
      task.context = contextOf({ ...task.context, ...config.context }, ctx);
    }
    const timing = schedule !== task.schedule || timeZone !== (task.timeZone ?? null) || (config.enabled !== undefined && config.enabled !== task.enabled);
    Object.assign(task, {
      // Whoever saves a task shapes what it does: it acts with no more than the weakest of them (runner.ts).
      authors: withAuthor(task.authors, authorOf(ctx)),
      actionType,
      actionConfig,
      schedule,
      timeZone,
      ...(config.name !== undefined ? { name: config.name } : {}),
      ...(config.description !== undefined ? { description: config.description } : {}),
      ...(config.category !== undefined ? { category: config.category } : {}),
      ...(config.tags !== undefined ? { tags: config.tags } : {}),
      ...(config.enabled !== undefined ? { enabled: config.enabled } : {}),
      updatedAt: new Date(),
    });
    if (timing) task.nextRun = this.#nextRun(task, config.schedule !== undefined);
    await ctx.em.flush();
    return true;
  }

  async delete(ctx: AuthenticatedContext, id: string): Promise<true> {
    await ctx.em.remove(await this.#changeable(ctx, ctx.em, id)).flush();
    return true;
  }

  /** Enables or disables a task: a disabled task has no next run; enabled again, it fires at its schedule's next time from now. */
  async setEnabled(ctx: AuthenticatedContext, id: string, enabled: boolean): Promise<true> {
    const task = await this.#changeable(ctx, ctx.em, id);
    if (task.enabled !== enabled) {
      task.enabled = enabled;
      task.nextRun = this.#nextRun(task, false);
      task.updatedAt = new Date();
      await ctx.em.flush();
    }
    return true;
  }

  async findById(ctx: AuthenticatedContext, id: string): Promise<TaskRecord> {
    return toRecord(await this.#find(ctx.em, id));
  }

  async getData(ctx: AuthenticatedContext, query: ListQuery): Promise<ListEnvelope<TaskRecord>> {
    const sort = toOrderBy(query.sort, VIEW.fields);
    const [tasks, totalCount] = await ctx.em.findAndCount(ScheduledTask, toWhere(query.filter, VIEW.fields), {
      orderBy: { ...sort, ...(Object.keys(sort).length === 0 ? { createdAt: 'desc' } : {}), id: 'asc' },
      limit: query.pageSize,
      offset: (query.page - 1) * query.pageSize,
    });
    return { data: tasks.map(toRecord), totalCount };
  }

  /** The next run from now of an enabled task (a `once:` task keeps null once fired, unless its time was changed); null when disabled. */
  #nextRun(task: ScheduledTask, scheduleChanged: boolean): Date | null {
    if (!task.enabled) return null;
    return nextRunOf(parseSchedule(task.schedule, task.timeZone ?? null), new Date(), scheduleChanged ? null : (task.lastRun ?? null));
  }

  #checkAction(actionType: ActionType, actionConfig: Record<string, unknown>, prefix = 'taskConfig'): Record<string, unknown> {
    const parsed = v.safeParse(ACTION_CONFIGS[actionType], actionConfig);
    if (parsed.success && actionType === 'event' && this.#bus.isCatalogued((parsed.output as { eventName: string }).eventName)) {
      throw validationError([
        { path: `${prefix}.actionConfig.eventName`, message: 'event: this is an event of the service itself; choose a name of your own' },
      ]);
    }
    if (parsed.success) return parsed.output as Record<string, unknown>;
    throw validationError(
      parsed.issues.map((issue): ValidationIssue => ({
        path: [`${prefix}.actionConfig`, v.getDotPath(issue)].filter(Boolean).join('.'),
        message: `${actionType}: ${issue.message}`,
      })),
    );
  }

  #checkSchedule(schedule: string, timeZone: string | null, prefix = 'taskConfig'): void {
    const problem = scheduleProblem(schedule, timeZone);
    if (problem) throw validationError([{ path: `${prefix}.${problem.path}`, message: problem.message }]);
  }

  /** The user a task acts as: the caller unless the context names another user of the subscription, which only admins may. */
  async #actingUser(ctx: AuthenticatedContext, context: ContextInput, prefix = 'taskConfig'): Promise<string> {
    if (context.subscriptionId !== undefined && context.subscriptionId !== ctx.subscriptionId) {
      throw validationError([{ path: `${prefix}.context.subscriptionId`, message: 'a task runs in your own subscription' }]);
    }
    const userId = context.userId ?? ctx.userId;
    if (userId === ctx.userId) return userId;
    if (ctx.role !== 'admin') throw forbidden('Only admins may schedule tasks that act as another user');
    if (!(await this.#users.credentialHolder(ctx.subscriptionId, userId)))
      throw validationError([{ path: `${prefix}.context.userId`, message: `No user ${userId} in this subscription` }]);
    return userId;
  }

  async #find(em: EntityManager, id: string): Promise<ScheduledTask> {
    const task = await em.findOne(ScheduledTask, { id });
    if (!task) throw notFound(`Scheduled task ${id} not found`);
    return task;
  }

  async #changeable(ctx: AuthenticatedContext, em: EntityManager, id: string): Promise<ScheduledTask> {
    const task = await this.#find(em, id);
    if (!mayChangeRecordOf(ctx, task.createdBy)) throw forbidden('Only its creator, admins and staff may change this task');
    return task;
  }
}

/** What a task keeps of its context besides user and subscription: serviceCode, and projectId (the caller's context project by default). */
function contextOf(context: ContextInput, ctx: AuthenticatedContext): TaskContext {
  const projectId = context.projectId ?? ctx.projectId ?? undefined;
  return { ...(context.serviceCode !== undefined ? { serviceCode: context.serviceCode } : {}), ...(projectId ? { projectId } : {}) };
}
