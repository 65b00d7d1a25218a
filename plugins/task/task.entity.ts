import * as v from 'valibot';
import { defineEntity, wireTimestamp, type InferEntity } from 'rpc-service/plugin';

/** A comment as kept with its task (the comments column) and answered. */
export const COMMENT = v.strictObject({
  commentId: v.string(),
  authorContactId: v.string(),
  content: v.string(),
  createdAt: wireTimestamp,
  updatedAt: v.nullable(wireTimestamp),
});
export type Comment = v.InferOutput<typeof COMMENT>;

export const STATUSES = ['todo', 'in_progress', 'in_review', 'done', 'blocked'] as const;
export type Status = (typeof STATUSES)[number];
export const PRIORITIES = ['low', 'medium', 'high', 'urgent'] as const;
export type Priority = (typeof PRIORITIES)[number];

/**
 * A task of a task instance (a board: whatever container the caller's
 * application groups tasks by), possibly a subtask of another task of the
 * same instance. Comments are kept with the task, in order.
 */
export const Task = defineEntity({
  name: 'Task',
  tableName: 'task',
  properties: (p) => ({
    subscriptionId: p.uuid().primary(),
    id: p.uuid().primary(),
    taskInstanceId: p.text(),
    title: p.text(),
    description: p.text().nullable(),
    status: p.enum([...STATUSES]),
    priority: p.enum([...PRIORITIES]),
    /** Messaging contact ids. */
    assignees: p.array(),
    parentId: p.uuid().nullable(),
    dueDate: p.datetime().nullable(),
    completedAt: p.datetime().nullable(),
    tags: p.array(),
    comments: p.json<Comment[]>(),
    isArchived: p.boolean(),
    createdBy: p.uuid(),
    createdAt: p.datetime(),
    updatedAt: p.datetime(),
  }),
  indexes: [{ properties: ['subscriptionId', 'taskInstanceId', 'createdAt'] }, { properties: ['subscriptionId', 'parentId'] }],
});
export type Task = InferEntity<typeof Task>;
