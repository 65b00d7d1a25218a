import { asClass } from 'awilix';
import { definePlugin } from 'rpc-service/plugin';
import { DEPS, type NotificationDeps } from './deps.ts';
import { migrations } from './migrations/index.ts';
import { Notification } from './notification.entity.ts';
import { NOTIFICATION, NOTIFICATION_CREATED, NotificationService } from './notification.service.ts';
import { deleteAll, findById, getData, getSchema, markAllAsRead, markAsRead, remove } from './operations.ts';

declare module 'rpc-service/plugin' {
  interface PluginServices {
    /** Notifications for users: other plugins make them with `notify` (a task assigned, an agent's answer, a broadcast). */
    notificationService: NotificationService;
  }
}

/** NotificationRpc: each user's own notifications, and the service other plugins make them with. */
export const notificationPlugin = definePlugin<NotificationDeps>({
  id: 'notification',
  group: 'NotificationRpc',
  coreVersion: '^2.0.0',
  deps: DEPS,
  entities: [Notification],
  migrations,
  services: { notificationService: asClass(NotificationService).singleton() },
  exports: ['notificationService'],
  extends: {
    'core.events': [
      {
        name: NOTIFICATION_CREATED,
        describe: 'A notification for you: the notification record {_id, title, message, read, timestamp, userId, source, data}.',
        payload: NOTIFICATION.schema,
      },
    ],
  },
  operations: { getSchema, getData, findById, delete: remove, markAsRead, markAllAsRead, deleteAll },
});
