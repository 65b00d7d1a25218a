import { defineEntity, type Author, type InferEntity } from 'rpc-service/plugin';

export const ACTION_TYPES = ['event', 'rpc', 'workflow', 'aiMessage'] as const;
export type ActionType = (typeof ACTION_TYPES)[number];
export const CATEGORIES = ['system', 'user', 'campaign', 'automation'] as const;
export type Category = (typeof CATEGORIES)[number];

/** What a task's context holds besides the user it acts as and its subscription. */
export interface TaskContext {
  serviceCode?: string;
  projectId?: string;
}

/**
 * A scheduled task: what it does (actionType and actionConfig), when
 * (schedule, in timeZone), as whom (userId, with that user's rights at the
 * time it fires), and when it fires next. `nextRun` is null while it is
 * disabled and once a `once:` task has fired.
 */
export const ScheduledTask = defineEntity({
  name: 'ScheduledTask',
  tableName: 'scheduler_task',
  properties: (p) => ({
    subscriptionId: p.uuid().primary(),
    id: p.uuid().primary(),
    /** The user it acts as (its context's userId). */
    userId: p.uuid(),
    createdBy: p.uuid(),
    /** Who shaped what it does: its creator, then each later editor (plugins/scheduler/README.md, "Whose rights a task has"). */
    authors: p.json<Author[]>(),
    name: p.text(),
    description: p.text().nullable(),
    schedule: p.text(),
    timeZone: p.text().nullable(),
    actionType: p.enum([...ACTION_TYPES]),
    actionConfig: p.json<Record<string, unknown>>(),
    context: p.json<TaskContext>(),
    category: p.enum([...CATEGORIES]),
    tags: p.array(),
    enabled: p.boolean(),
    nextRun: p.datetime().nullable(),
    lastRun: p.datetime().nullable(),
    createdAt: p.datetime(),
    updatedAt: p.datetime(),
  }),
  indexes: [
    { properties: ['subscriptionId', 'createdAt'] },
    // The due tasks of every subscription, in firing order: what the scheduler claims.
    {
      name: 'scheduler_task_due_index',
      expression: 'create index "scheduler_task_due_index" on "scheduler_task" ("next_run") where "enabled" and "next_run" is not null',
    },
  ],
});
export type ScheduledTask = InferEntity<typeof ScheduledTask>;
