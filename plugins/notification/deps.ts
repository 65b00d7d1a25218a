import { operationBuilder, type Deps } from 'rpc-service/plugin';

/** What NotificationRpc uses: the core's notifications. */
export const DEPS = ['notifications'] as const;

export type NotificationDeps = Deps<typeof DEPS>;

export const defineOperation = operationBuilder<NotificationDeps>();
