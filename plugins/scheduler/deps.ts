import { jobBuilder, operationBuilder, type Deps } from 'rpc-service/plugin';
import type { SchedulerConfig } from './config.ts';
import type { SchedulerRunner } from './runner.ts';
import type { SchedulerService } from './scheduler.service.ts';

/**
 * What SchedulerRpc uses: the database, the bus (event actions), the in-process operation caller (rpc, workflow
 * and aiMessage actions, as the task's user), the AI client and the notification plugin's notifications (aiMessage) and the
 * auth plugin's users.
 */
export const DEPS = ['db', 'bus', 'operations', 'ai', 'notificationService', 'userService'] as const;

export type SchedulerDeps = Deps<typeof DEPS, { schedulerService: SchedulerService; schedulerRunner: SchedulerRunner }, SchedulerConfig>;

export const defineOperation = operationBuilder<SchedulerDeps>();
export const defineJob = jobBuilder<SchedulerDeps>();
