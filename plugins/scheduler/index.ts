import { asClass } from 'awilix';
import { definePlugin } from 'rpc-service/plugin';
import { DEPS, type SchedulerDeps } from './deps.ts';
import { migrations } from './migrations/index.ts';
import { create, disable, enable, findById, getData, remove, update } from './operations.ts';
import { SchedulerService } from './scheduler.service.ts';
import { ScheduledTask } from './task.entity.ts';

/** SchedulerRpc: tasks of a subscription that fire on a cron schedule (in a time zone) or once, raising an event, calling an operation, running a workflow or messaging an agent. */
export const schedulerPlugin = definePlugin<SchedulerDeps>({
  id: 'scheduler',
  group: 'SchedulerRpc',
  coreVersion: '^2.0.0',
  deps: DEPS,
  entities: [ScheduledTask],
  migrations,
  services: { schedulerService: asClass(SchedulerService).singleton() },
  operations: { create, update, delete: remove, enable, disable, getData, findById },
});
