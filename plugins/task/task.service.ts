import { randomUUID } from 'node:crypto';
import * as v from 'valibot';
import {
  defineRecord,
  notFound,
  toOrderBy,
  toWhere,
  validationError,
  type AuthenticatedContext,
  type EntityManager,
  type EventBus,
  type InferRecord,
  type ListEnvelope,
  type ListQuery,
  type PluginServices,
} from 'rpc-service/plugin';
import { COMMENT, PRIORITIES, STATUSES, Task, type Comment, type Priority, type Status } from './task.entity.ts';

/** A comment given with a task (create, createTaskTree): its content, and optionally who wrote it and when. */
export interface CommentInput {
  content: string;
  commentId?: string;
  authorContactId?: string;
  createdAt?: Date;
  updatedAt?: Date | null;
}

export interface TaskFields {
  title?: string;
  description?: string | null;
  status?: Status;
  priority?: Priority;
  assignees?: string[];
  dueDate?: Date | null;
  completedAt?: Date | null;
  tags?: string[];
  isArchived?: boolean;
}

export interface TaskInput extends TaskFields {
  title: string;
  parentId?: string | null;
  comments?: CommentInput[];
}

export interface TreeInput extends TaskInput {
  subtasks?: TreeInput[];
}

export const TASK = defineRecord(Task, { hide: ['subscriptionId', 'createdBy'] });
export type TaskRecord = InferRecord<typeof TASK>;

export type TreeRecord = TaskRecord & { subtasks: TreeRecord[] };

/** The record as operations answer it. */
export const TASK_SCHEMA = v.strictObject({
  ...TASK.entries,
  // The derived schema takes any text for the enumerations and any value for the comments (a JSON column).
  status: v.picklist(STATUSES),
  priority: v.picklist(PRIORITIES),
  comments: v.array(COMMENT),
});
/** A task of createTaskTree's answer: the task and the tasks below it. */
export const TREE_SCHEMA: v.GenericSchema<TreeRecord> = v.strictObject({ ...TASK_SCHEMA.entries, subtasks: v.array(v.lazy(() => TREE_SCHEMA)) });
/** What addComment answers: the comment, not yet updated. */
export const NEW_COMMENT_SCHEMA = v.omit(COMMENT, ['updatedAt']);

/** How deep a createTaskTree hierarchy may go, and how many tasks it may hold in all. */
export const MAX_TREE_DEPTH = 5;
export const MAX_TREE_TASKS = 500;

/**
 * Task boards: tasks per task instance, subtasks within the same instance,
 * comments, whole hierarchies created at once. `completedAt` follows the
 * status: set when a task becomes done (to now unless given), cleared when
 * it leaves done (unless given). Events go to the subscription's clients.
 */
export class TaskService {
  readonly #bus: EventBus;
  readonly #users: PluginServices['userService'];
  readonly #notifications: PluginServices['notificationService'];

  constructor({
    bus,
    userService,
    notificationService,
  }: {
    bus: EventBus;
    userService: PluginServices['userService'];
    notificationService: PluginServices['notificationService'];
  }) {
    this.#bus = bus;
    this.#users = userService;
    this.#notifications = notificationService;
  }

  async getData(ctx: AuthenticatedContext, taskInstanceId: string, query: ListQuery): Promise<ListEnvelope<TaskRecord>> {
    const sort = toOrderBy(query.sort, TASK.fields);
    const [tasks, totalCount] = await ctx.em.findAndCount(
      Task,
      { $and: [{ taskInstanceId }, toWhere(query.filter, TASK.fields)] },
      {
        orderBy: { ...sort, ...(Object.keys(sort).length === 0 ? { createdAt: 'asc' } : {}), id: 'asc' },
        limit: query.pageSize,
        offset: (query.page - 1) * query.pageSize,
      },
    );
    return { data: tasks.map(TASK.toRecord), totalCount };
  }

  async create(ctx: AuthenticatedContext, taskInstanceId: string, input: TaskInput): Promise<TaskRecord> {
    const author = await this.#author(ctx);
    const task = await ctx.em.fork().transactional(async (em) => {
      if (input.parentId) await this.#checkParent(em, taskInstanceId, input.parentId);
      return this.#insert(ctx, em, taskInstanceId, input, input.parentId ?? null, author);
    });
    await this.#announce(ctx, 'task.created', task);
    await this.#assigned(ctx, task, task.assignees);
    return TASK.toRecord(task);
  }

  async update(ctx: AuthenticatedContext, id: string, changes: TaskFields): Promise<TaskRecord> {
    const { task, added } = await ctx.em.fork().transactional(async (em) => {
      const task = await this.#find(em, id);
      const before = new Set(task.assignees);
      const wasDone = task.status === 'done';
      Object.assign(task, definedOnly(changes), { updatedAt: new Date() });
      if (task.status === 'done' && !wasDone) task.completedAt = changes.completedAt !== undefined ? changes.completedAt : (task.completedAt ?? new Date());
      if (task.status !== 'done' && wasDone && changes.completedAt === undefined) task.completedAt = null;
      await em.flush();
      return { task, added: task.assignees.filter((assignee) => !before.has(assignee)) };
    });
    await this.#announce(ctx, 'task.updated', task);
    await this.#assigned(ctx, task, added);
    return TASK.toRecord(task);
  }

  /** Deletes a task and every task below it; `success: false` when there is no such task. */
  async delete(ctx: AuthenticatedContext, id: string): Promise<{ success: boolean }> {
    const deleted = await ctx.em.execute<{ id: string }[]>(
      `with recursive subtree as (
         select id from task where id = ? and subscription_id = ?
         union all
         select child.id from task child join subtree on child.parent_id = subtree.id where child.subscription_id = ?)
       delete from task where subscription_id = ? and id in (select id from subtree) returning id`,
      [id, ctx.subscriptionId, ctx.subscriptionId, ctx.subscriptionId],
    );
    return { success: deleted.length > 0 };
  }

  async findById(ctx: AuthenticatedContext, id: string): Promise<TaskRecord> {
    return TASK.toRecord(await this.#find(ctx.em, id));
  }

  /** Appends a comment by the caller (their messaging contact, else their user id). */
  async addComment(ctx: AuthenticatedContext, taskId: string, content: string): Promise<Omit<Comment, 'updatedAt'>> {
    const comment: Comment = {
      commentId: randomUUID(),
      authorContactId: await this.#author(ctx),
      content,
      createdAt: new Date().toISOString(),
      updatedAt: null,
    };
    const updated = await ctx.em.execute<{ id: string }[]>(
      'update task set comments = comments || ?::jsonb, updated_at = now() where id = ? and subscription_id = ? returning id',
      [JSON.stringify([comment]), taskId, ctx.subscriptionId],
    );
    if (updated.length === 0) throw notFound(`Task ${taskId} not found`);
    await this.#bus.publish({ name: 'task.commented', payload: { taskId, comment }, subscriptionId: ctx.subscriptionId });
    const { updatedAt: _updatedAt, ...answer } = comment;
    return answer;
  }

  /** Creates a hierarchy of tasks in one transaction: all of it, or (on any error) none of it. */
  async createTaskTree(ctx: AuthenticatedContext, taskInstanceId: string, tasks: TreeInput[]): Promise<{ created: number; tasks: TreeRecord[] }> {
    const author = await this.#author(ctx);
    const created: Task[] = [];
    const tree = await ctx.em.fork().transactional(async (em) => {
      const insert = async (inputs: TreeInput[], parentId: string | null): Promise<TreeRecord[]> => {
        const records: TreeRecord[] = [];
        for (const input of inputs) {
          const task = await this.#insert(ctx, em, taskInstanceId, input, parentId, author);
          created.push(task);
          records.push({ ...TASK.toRecord(task), subtasks: await insert(input.subtasks ?? [], task.id) });
        }
        return records;
      };
      return insert(tasks, null);
    });
    for (const task of created) await this.#announce(ctx, 'task.created', task);
    return { created: created.length, tasks: tree };
  }

  async #insert(
    ctx: AuthenticatedContext,
    em: EntityManager,
    taskInstanceId: string,
    input: TaskInput,
    parentId: string | null,
    author: string,
  ): Promise<Task> {
    const now = new Date();
    const status = input.status ?? 'todo';
    const task = em.create(Task, {
      id: randomUUID(),
      subscriptionId: ctx.subscriptionId,
      taskInstanceId,
      title: input.title,
      description: input.description ?? null,
      status,
      priority: input.priority ?? 'medium',
      assignees: input.assignees ?? [],
      parentId,
      dueDate: input.dueDate ?? null,
      completedAt: input.completedAt !== undefined ? input.completedAt : status === 'done' ? now : null,
      tags: input.tags ?? [],
      comments: (input.comments ?? []).map((comment) => ({
        commentId: comment.commentId ?? randomUUID(),
        authorContactId: comment.authorContactId ?? author,
        content: comment.content,
        createdAt: (comment.createdAt ?? now).toISOString(),
        updatedAt: comment.updatedAt ? comment.updatedAt.toISOString() : null,
      })),
      isArchived: input.isArchived ?? false,
      createdBy: ctx.userId,
      createdAt: now,
      updatedAt: now,
    });
    await em.flush();
    return task;
  }

  /** A parent must be a task of the same subscription and task instance. */
  async #checkParent(em: EntityManager, taskInstanceId: string, parentId: string): Promise<void> {
    const parent = await em.findOne(Task, { id: parentId });
    if (!parent || parent.taskInstanceId !== taskInstanceId) {
      throw validationError([{ path: 'parentId', message: `No task ${parentId} in task instance ${taskInstanceId}` }]);
    }
  }

  /** Tells the subscription (`task.assigned`) and notifies the users known by the contacts just assigned. */
  async #assigned(ctx: AuthenticatedContext, task: Task, assignees: string[]): Promise<void> {
    if (assignees.length === 0) return;
    await this.#announce(ctx, 'task.assigned', task, { assignees });
    const userIds = (await this.#users.usersByContactIds(ctx.subscriptionId, assignees)).filter((userId) => userId !== ctx.userId);
    await this.#notifications.notify({
      subscriptionId: ctx.subscriptionId,
      userIds,
      title: 'A task was assigned to you',
      message: task.title,
      source: 'task',
      data: { taskId: task.id, taskInstanceId: task.taskInstanceId },
    });
  }

  async #author(ctx: AuthenticatedContext): Promise<string> {
    return (await this.#users.contactIdOf(ctx.subscriptionId, ctx.userId)) ?? ctx.userId;
  }

  async #find(em: EntityManager, id: string): Promise<Task> {
    const task = await em.findOne(Task, { id });
    if (!task) throw notFound(`Task ${id} not found`);
    return task;
  }

  async #announce(ctx: AuthenticatedContext, name: string, task: Task, extra: Record<string, unknown> = {}): Promise<void> {
    await this.#bus.publish({ name, payload: { task: TASK.toRecord(task), ...extra }, subscriptionId: ctx.subscriptionId });
  }
}

const definedOnly = <T extends object>(changes: T): Partial<T> =>
  Object.fromEntries(Object.entries(changes).filter(([, value]) => value !== undefined)) as Partial<T>;
