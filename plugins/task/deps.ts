import { operationBuilder, type Deps } from 'rpc-service/plugin';
import type { TaskService } from './task.service.ts';

/** What TaskRpc uses: the bus (task events) and the auth plugin's users (a comment's author contact). */
export const DEPS = ['bus', 'userService'] as const;

export type TaskDeps = Deps<typeof DEPS, { taskService: TaskService }>;

export const defineOperation = operationBuilder<TaskDeps>();
