import * as v from 'valibot';
import { listParams, listSchema, recordId, stringList, trimmedText } from 'rpc-service/plugin';
import { defineOperation } from './deps.ts';
import { RUN_STATUSES } from './run.entity.ts';
import { RUN_SCHEMA } from './runner.ts';
import { TASK_SCHEMA } from './scheduler.service.ts';
import { ACTION_TYPES, CATEGORIES } from './task.entity.ts';

const optionalText = (label: string, max: number) =>
  v.optional(v.pipe(v.string(`${label} must be a string`), v.maxLength(max, `${label} must be at most ${max} characters`)));

/** The context every operation takes, and a task keeps: the user it acts as, its subscription, service and project. */
const context = v.optional(
  v.object({
    userId: v.optional(recordId('context.userId')),
    subscriptionId: v.optional(recordId('context.subscriptionId')),
    serviceCode: optionalText('context.serviceCode', 200),
    projectId: optionalText('context.projectId', 200),
  }),
);

const fields = {
  name: trimmedText('name', 200),
  description: v.optional(v.nullable(v.pipe(v.string('description must be a string'), v.maxLength(5000, 'description must be at most 5000 characters')))),
  schedule: trimmedText('schedule', 200),
  actionType: v.picklist(ACTION_TYPES, `actionType must be one of ${ACTION_TYPES.join(', ')}`),
  actionConfig: v.record(v.string(), v.unknown(), 'actionConfig must be an object'),
  context,
  category: v.optional(v.picklist(CATEGORIES, `category must be one of ${CATEGORIES.join(', ')}`)),
  tags: v.optional(stringList('tags')),
  enabled: v.optional(v.boolean('enabled must be true or false')),
  timeZone: v.optional(v.nullable(trimmedText('timeZone', 100))),
};
const taskId = { taskId: recordId('taskId'), context };

export const create = defineOperation({
  access: 'user',
  kind: 'write',
  describe:
    'Schedule a task: name, schedule (a cron pattern in timeZone, UTC by default, or once:<ISO 8601 UTC time>), actionType (event, rpc, workflow, aiMessage) and its actionConfig; answers the new task id.',
  result: v.string(),
  params: v.object({ taskConfig: v.object(fields), context }),
  handler: ({ params, ctx, deps }) => deps.schedulerService.create(ctx, params.taskConfig, params.context),
});

export const update = defineOperation({
  access: 'user',
  kind: 'write',
  describe: 'Change the fields given of a task you created (admins and staff: any); its next run follows a new schedule. Answers true.',
  result: v.literal(true),
  params: v.object({ ...taskId, updatedConfig: v.object({ ...v.partial(v.object(fields)).entries }) }),
  handler: ({ params, ctx, deps }) => deps.schedulerService.update(ctx, params.taskId, params.updatedConfig),
});

export const remove = defineOperation({
  access: 'user',
  kind: 'write',
  describe: 'Delete a task you created (admins and staff: any). Answers true.',
  result: v.literal(true),
  params: v.object(taskId),
  handler: ({ params, ctx, deps }) => deps.schedulerService.delete(ctx, params.taskId),
});

export const enable = defineOperation({
  access: 'user',
  kind: 'write',
  describe: "Enable a task: it fires at its schedule's next time from now. Answers true.",
  result: v.literal(true),
  params: v.object(taskId),
  handler: ({ params, ctx, deps }) => deps.schedulerService.setEnabled(ctx, params.taskId, true),
});

export const disable = defineOperation({
  access: 'user',
  kind: 'write',
  describe: 'Disable a task: it does not fire, and has no next run, until enabled again. Answers true.',
  result: v.literal(true),
  params: v.object(taskId),
  handler: ({ params, ctx, deps }) => deps.schedulerService.setEnabled(ctx, params.taskId, false),
});

export const getData = defineOperation({
  access: 'user',
  kind: 'read',
  describe: "The subscription's scheduled tasks with nextRun and lastRun; document-store filters, sort, paging (pageSize 25 by default).",
  result: listSchema(TASK_SCHEMA),
  params: v.object({ ...listParams(25), context }),
  handler: ({ params, ctx, deps }) => deps.schedulerService.getData(ctx, params),
});

export const findById = defineOperation({
  access: 'user',
  kind: 'read',
  describe: 'One scheduled task, with nextRun and lastRun.',
  result: TASK_SCHEMA,
  params: v.object(taskId),
  handler: ({ params, ctx, deps }) => deps.schedulerService.findById(ctx, params.taskId),
});

export const listRuns = defineOperation({
  access: 'user',
  kind: 'read',
  describe:
    'Runs of scheduled tasks, newest first: when each was due and fired (delayMs), its status, error and result; of one task (taskId) and in one status when given. Admins see every run of the subscription, others the runs of tasks acting as them.',
  result: listSchema(RUN_SCHEMA),
  params: v.object({
    taskId: v.optional(recordId('taskId')),
    status: v.optional(v.picklist(RUN_STATUSES, `status must be one of ${RUN_STATUSES.join(', ')}`)),
    page: listParams(25).page,
    pageSize: listParams(25).pageSize,
    context,
  }),
  handler: ({ params, ctx, deps }) => deps.schedulerRunner.listRuns(ctx, params),
});
