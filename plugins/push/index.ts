import { asClass } from 'awilix';
import { definePlugin } from 'rpc-service/plugin';
import { DEPS, type PushDeps } from './deps.ts';
import { migrations } from './migrations/index.ts';
import { getVapidPublicKey, subscribe, unsubscribe } from './operations.ts';
import { PushSubscription } from './subscription.entity.ts';
import { PushService } from './push.service.ts';
import { VapidKeys } from './vapid-keys.entity.ts';

declare module 'rpc-service/plugin' {
  interface PluginServices {
    /** Push devices and the VAPID keys; PushSenderRpc reads devices (`devices`), signs with `vapidKeys` and forgets gone ones (`removeDevice`). */
    pushService: PushService;
  }
}

/** PushNotificationRpc: the service's VAPID public key, and browsers' web push subscriptions per user and channel. */
export const pushPlugin = definePlugin<PushDeps>({
  id: 'push',
  group: 'PushNotificationRpc',
  coreVersion: '^2.0.0',
  deps: DEPS,
  entities: [PushSubscription, VapidKeys],
  migrations,
  services: { pushService: asClass(PushService).singleton() },
  exports: ['pushService'],
  extends: {
    // A removed user's browsers go in the same transaction: nothing is pushed to them again.
    'auth.lifecycle': [{ userRemoved: async ({ em, userId }) => void (await em.nativeDelete(PushSubscription, { userId })) }],
  },
  operations: { getVapidPublicKey, subscribe, unsubscribe },
});
