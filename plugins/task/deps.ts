import { operationBuilder, type Deps } from 'rpc-service/plugin';
import type { TaskService } from './task.service.ts';

/** What TaskRpc uses: the bus (task events), the notification plugin's notifications (assignees) and the auth plugin's users (contacts). */
export const DEPS = ['bus', 'notificationService', 'userService'] as const;

export type TaskDeps = Deps<typeof DEPS, { taskService: TaskService }>;

export const defineOperation = operationBuilder<TaskDeps>();
