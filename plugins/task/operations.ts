import * as v from 'valibot';
import { listParams, listSchema, recordId, stringList, trimmedText } from 'rpc-service/plugin';
import { defineOperation } from './deps.ts';
import { PRIORITIES, STATUSES } from './task.entity.ts';
import { MAX_TREE_DEPTH, MAX_TREE_TASKS, NEW_COMMENT_SCHEMA, TASK_SCHEMA, TREE_SCHEMA, type TreeInput } from './task.service.ts';

const date = (label: string) =>
  v.optional(
    v.nullable(
      v.pipe(
        v.string(`${label} must be an ISO 8601 date`),
        v.check((value) => !Number.isNaN(Date.parse(value)), `${label} must be an ISO 8601 date`),
        v.transform((value) => new Date(value)),
      ),
    ),
  );
const strings = (label: string) => stringList(label, { maxItems: 100, maxLength: 200 });
const taskInstanceId = trimmedText('taskInstanceId', 200);

/** The fields of a task any operation that writes one takes, with the defaults of `plugins/task/README.md` applied by the service. */
const fields = {
  description: v.optional(v.nullable(v.pipe(v.string('description must be a string'), v.maxLength(20_000, 'description must be at most 20000 characters')))),
  status: v.optional(v.picklist(STATUSES, `status must be one of ${STATUSES.join(', ')}`)),
  priority: v.optional(v.picklist(PRIORITIES, `priority must be one of ${PRIORITIES.join(', ')}`)),
  assignees: v.optional(strings('assignees')),
  dueDate: date('dueDate'),
  completedAt: date('completedAt'),
  tags: v.optional(strings('tags')),
  isArchived: v.optional(v.boolean('isArchived must be true or false')),
};
const comment = v.object({
  content: trimmedText('content', 20_000),
  commentId: v.optional(v.pipe(v.string(), v.uuid('commentId must be a UUID'))),
  authorContactId: v.optional(trimmedText('authorContactId', 200)),
  createdAt: v.optional(
    v.pipe(
      date('createdAt'),
      v.transform((value) => value ?? undefined),
    ),
  ),
  updatedAt: date('updatedAt'),
});
const newTask = { title: trimmedText('title', 500), ...fields, comments: v.optional(v.pipe(v.array(comment, 'comments must be an array'), v.maxLength(1000))) };

const treeNode: v.GenericSchema<unknown, TreeInput> = v.object({
  ...newTask,
  subtasks: v.optional(
    v.array(
      v.lazy(() => treeNode),
      'subtasks must be an array',
    ),
  ),
});

/** The depth and the number of tasks of a tree, for its limits. */
function measure(tasks: TreeInput[], depth = 1): { depth: number; count: number } {
  return tasks.reduce(
    (total, task) => {
      const below = measure(task.subtasks ?? [], depth + 1);
      return { depth: Math.max(total.depth, task.subtasks?.length ? below.depth : depth), count: total.count + 1 + below.count };
    },
    { depth, count: 0 },
  );
}

export const getData = defineOperation({
  access: 'user',
  kind: 'read',
  describe: 'Tasks of a task instance with document-store filters, sort and paging (page 1 and pageSize 50 by default); oldest first unless sorted.',
  result: listSchema(TASK_SCHEMA),
  params: v.object({ taskInstanceId, ...listParams(50) }),
  handler: ({ params: { taskInstanceId, ...query }, ctx, deps }) => deps.taskService.getData(ctx, taskInstanceId, query),
});

export const create = defineOperation({
  access: 'user',
  kind: 'write',
  describe: 'Create a task (status todo, priority medium, no assignees, tags or comments, not archived by default); parentId a task of the same instance.',
  result: TASK_SCHEMA,
  params: v.object({ taskInstanceId, ...newTask, parentId: v.optional(v.nullable(recordId('parentId'))) }),
  handler: ({ params: { taskInstanceId, ...input }, ctx, deps }) => deps.taskService.create(ctx, taskInstanceId, input),
});

export const update = defineOperation({
  access: 'user',
  kind: 'write',
  describe: 'Change the fields given of a task; completedAt is set when it becomes done and cleared when it leaves done, unless given.',
  result: TASK_SCHEMA,
  params: v.object({ _id: recordId('_id'), title: v.optional(trimmedText('title', 500)), ...fields }),
  handler: ({ params: { _id, ...changes }, ctx, deps }) => deps.taskService.update(ctx, _id, changes),
});

export const remove = defineOperation({
  access: 'user',
  kind: 'write',
  describe: 'Delete a task and all its subtasks; {success: false} when there is no such task.',
  result: v.strictObject({ success: v.boolean() }),
  params: v.object({ _id: recordId('_id') }),
  handler: ({ params, ctx, deps }) => deps.taskService.delete(ctx, params._id),
});

export const findById = defineOperation({
  access: 'user',
  kind: 'read',
  describe: 'One task.',
  result: TASK_SCHEMA,
  params: v.object({ _id: recordId('_id') }),
  handler: ({ params, ctx, deps }) => deps.taskService.findById(ctx, params._id),
});

export const addComment = defineOperation({
  access: 'user',
  kind: 'write',
  describe: 'Comment on a task as the caller (authorContactId: their messaging contact, else their user id); answers the comment.',
  result: NEW_COMMENT_SCHEMA,
  params: v.object({ taskId: recordId('taskId'), content: trimmedText('content', 20_000) }),
  handler: ({ params, ctx, deps }) => deps.taskService.addComment(ctx, params.taskId, params.content),
});

export const createTaskTree = defineOperation({
  access: 'user',
  kind: 'write',
  describe: `Create tasks with nested subtasks in one transaction, all or nothing: at least 1 task, at most ${MAX_TREE_TASKS} in all, ${MAX_TREE_DEPTH} levels deep. Answers {created, tasks} (each with its subtasks).`,
  result: v.strictObject({ created: v.number(), tasks: v.array(TREE_SCHEMA) }),
  params: v.object({
    taskInstanceId,
    tasks: v.pipe(
      v.array(treeNode, 'tasks must be an array'),
      v.minLength(1, 'tasks must hold at least 1 task'),
      v.check((tasks) => measure(tasks).depth <= MAX_TREE_DEPTH, `a tree may be at most ${MAX_TREE_DEPTH} levels deep`),
      v.check((tasks) => measure(tasks).count <= MAX_TREE_TASKS, `a tree may hold at most ${MAX_TREE_TASKS} tasks`),
    ),
  }),
  handler: ({ params, ctx, deps }) => deps.taskService.createTaskTree(ctx, params.taskInstanceId, params.tasks),
});
