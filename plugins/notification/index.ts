import { definePlugin } from 'rpc-service/plugin';
import { DEPS, type NotificationDeps } from './deps.ts';
import { deleteAll, findById, getData, getSchema, markAllAsRead, markAsRead, remove } from './operations.ts';

/** NotificationRpc: each user's own notifications (made by the platform through the core's notifications service). */
export const notificationPlugin = definePlugin<NotificationDeps>({
  id: 'notification',
  group: 'NotificationRpc',
  coreVersion: '^2.0.0',
  deps: DEPS,
  operations: { getSchema, getData, findById, delete: remove, markAsRead, markAllAsRead, deleteAll },
});
