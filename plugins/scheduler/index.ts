import { asClass } from 'awilix';
import { definePlugin } from 'rpc-service/plugin';
import { schedulerSettings } from './config.ts';
import { DEPS, type SchedulerDeps } from './deps.ts';
import { recoverRuns } from './jobs.ts';
import { migrations } from './migrations/index.ts';
import { create, disable, enable, findById, getData, listRuns, remove, update } from './operations.ts';
import { TaskRun } from './run.entity.ts';
import { SchedulerRunner } from './runner.ts';
import { SchedulerService } from './scheduler.service.ts';
import { ScheduledTask } from './task.entity.ts';

/** SchedulerRpc: tasks of a subscription that fire on a cron schedule (in a time zone) or once, raising an event, calling an operation, running a workflow or messaging an agent. */
export const schedulerPlugin = definePlugin<SchedulerDeps>({
  id: 'scheduler',
  group: 'SchedulerRpc',
  coreVersion: '^2.0.0',
  config: schedulerSettings,
  deps: DEPS,
  entities: [ScheduledTask, TaskRun],
  migrations,
  services: { schedulerService: asClass(SchedulerService).singleton(), schedulerRunner: asClass(SchedulerRunner).singleton() },
  operations: { create, update, delete: remove, enable, disable, getData, findById, listRuns },
  jobs: { recoverRuns },
  start: ({ schedulerRunner }) => schedulerRunner.start(),
  stop: ({ schedulerRunner }) => schedulerRunner.stop(10_000),
});
