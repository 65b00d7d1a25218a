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
  extends: {
    // When the owner of a user's address joins that account (auth's UserService.claim), its tasks may have been written by
    // someone else: they stop, in the same transaction, until the person enables the ones they recognise.
    'auth.lifecycle': [
      {
        accountClaimed: async ({ em, subscriptionId, userId }) =>
          void (await em.nativeUpdate(ScheduledTask, { subscriptionId, userId }, { enabled: false, nextRun: null, updatedAt: new Date() })),
      },
    ],
  },
  start: ({ schedulerRunner }) => schedulerRunner.start(),
  stop: ({ schedulerRunner }) => schedulerRunner.stop(10_000),
});
