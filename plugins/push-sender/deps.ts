import { jobBuilder, operationBuilder, type Deps } from 'rpc-service/plugin';
import type { BroadcastNeeds, BroadcastService } from './broadcast.service.ts';
import type { PushSenderConfig } from './config.ts';

/**
 * What PushSenderRpc uses: jobs (the sending, in the background), the notification plugin's in-app notifications, the outbound guard
 * (every push request), the push plugin's devices and VAPID keys, and the auth plugin's users (the audience).
 */
export const DEPS = ['jobs', 'notificationService', 'outbound', 'pushService', 'userService'] as const satisfies BroadcastNeeds;

export type PushSenderDeps = Deps<typeof DEPS, { broadcastService: BroadcastService }, PushSenderConfig>;

export const defineOperation = operationBuilder<PushSenderDeps>();
export const defineJob = jobBuilder<PushSenderDeps>();
