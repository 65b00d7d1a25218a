import { operationBuilder, type Deps } from 'rpc-service/plugin';
import type { NotificationService } from './notification.service.ts';

/** What NotificationRpc uses: the database (notify stores outside a request) and the bus (`notification.created`). */
export const DEPS = ['db', 'bus'] as const;

export type NotificationDeps = Deps<typeof DEPS, { notificationService: NotificationService }>;

export const defineOperation = operationBuilder<NotificationDeps>();
