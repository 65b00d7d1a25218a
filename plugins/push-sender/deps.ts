import { jobBuilder, operationBuilder, type Deps, type PluginServices } from 'rpc-service/plugin';
import type { BroadcastService } from './broadcast.service.ts';
import type { PushSenderConfig } from './config.ts';

/**
 * What PushSenderRpc uses: jobs (the sending, in the background), in-app notifications, the outbound guard
 * (every push request), the push plugin's devices and VAPID keys, and the auth plugin's users (the audience).
 */
export const DEPS = ['jobs', 'notifications', 'outbound', 'pushService', 'userService'] as const;

export type PushSenderDeps = Deps<typeof DEPS, { broadcastService: BroadcastService }, PushSenderConfig>;

/** A browser subscribed to push, as the push plugin gives it. */
export type PushDevice = Awaited<ReturnType<PluginServices['pushService']['devices']>>[number];

export const defineOperation = operationBuilder<PushSenderDeps>();
export const defineJob = jobBuilder<PushSenderDeps>();
