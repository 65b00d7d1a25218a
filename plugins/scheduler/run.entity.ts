import { defineEntity, type InferEntity } from 'rpc-service/plugin';
import { ACTION_TYPES } from './task.entity.ts';

export const RUN_STATUSES = ['running', 'succeeded', 'failed'] as const;
export type RunStatus = (typeof RUN_STATUSES)[number];

/**
 * One firing of a scheduled task: when it was due and when it fired (the
 * difference is the scheduler's delay), how its action went, and what it
 * gave (a workflow run's id, an agent's answer). A run still `running` long
 * after it fired is fired again by the recovery job (its node stopped).
 */
export const TaskRun = defineEntity({
  name: 'TaskRun',
  tableName: 'scheduler_run',
  properties: (p) => ({
    subscriptionId: p.uuid().primary(),
    id: p.uuid().primary(),
    taskId: p.uuid(),
    taskName: p.text(),
    actionType: p.enum([...ACTION_TYPES]),
    scheduledFor: p.datetime(),
    firedAt: p.datetime(),
    finishedAt: p.datetime().nullable(),
    status: p.enum([...RUN_STATUSES]),
    error: p.text().nullable(),
    result: p.json<unknown>().nullable(),
    attempts: p.integer(),
  }),
  indexes: [
    { properties: ['subscriptionId', 'taskId', 'firedAt'] },
    { properties: ['subscriptionId', 'firedAt'] },
    {
      name: 'scheduler_run_running_index',
      expression: 'create index "scheduler_run_running_index" on "scheduler_run" ("fired_at") where "status" = \'running\'',
    },
  ],
});
export type TaskRun = InferEntity<typeof TaskRun>;
