import { asClass } from 'awilix';
import { definePlugin } from 'rpc-service/plugin';
import { DEPS, type PushDeps } from './deps.ts';
import { migrations } from './migrations/index.ts';
import { getVapidPublicKey, subscribe, unsubscribe } from './operations.ts';
import { PushSubscription, VapidKeys } from './push.entity.ts';
import { PushService } from './push.service.ts';

/** PushNotificationRpc: the service's VAPID public key, and browsers' web push subscriptions per user and channel. */
export const pushPlugin = definePlugin<PushDeps>({
  id: 'push',
  group: 'PushNotificationRpc',
  coreVersion: '^2.0.0',
  deps: DEPS,
  entities: [PushSubscription, VapidKeys],
  migrations,
  services: { pushService: asClass(PushService).singleton() },
  operations: { getVapidPublicKey, subscribe, unsubscribe },
});
