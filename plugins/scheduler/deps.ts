import { operationBuilder, type Deps } from 'rpc-service/plugin';
import type { SchedulerService } from './scheduler.service.ts';

/** What SchedulerRpc uses: the auth plugin's users (the user a task acts as). */
export const DEPS = ['userService'] as const;

export type SchedulerDeps = Deps<typeof DEPS, { schedulerService: SchedulerService }>;

export const defineOperation = operationBuilder<SchedulerDeps>();
