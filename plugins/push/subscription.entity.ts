import { defineEntity, type InferEntity } from 'rpc-service/plugin';

/**
 * A browser's push subscription, for one user of a subscription, on the
 * channels it listens to. An endpoint is unique within a subscription: the
 * same browser may be subscribed in several, and one tenant's endpoints say
 * nothing to another.
 */
export const PushSubscription = defineEntity({
  name: 'PushSubscription',
  tableName: 'push_subscription',
  properties: (p) => ({
    subscriptionId: p.uuid().primary(),
    id: p.uuid().primary(),
    userId: p.uuid(),
    endpoint: p.text(),
    p256dh: p.text(),
    auth: p.text(),
    channels: p.array(),
    createdAt: p.datetime(),
    updatedAt: p.datetime(),
  }),
  indexes: [{ properties: ['subscriptionId', 'userId'] }],
  uniques: [{ properties: ['subscriptionId', 'endpoint'] }],
});
export type PushSubscription = InferEntity<typeof PushSubscription>;
