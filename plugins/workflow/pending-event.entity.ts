import { defineEntity, type InferEntity } from 'rpc-service/plugin';

/**
 * An event delivered to a run that was not waiting for it yet (still running
 * towards its `wait` node): kept until a `wait` for that event takes it.
 */
export const PendingEvent = defineEntity({
  name: 'PendingEvent',
  tableName: 'workflow_pending_event',
  properties: (p) => ({
    subscriptionId: p.uuid().primary(),
    id: p.uuid().primary(),
    instanceId: p.uuid(),
    eventName: p.text(),
    eventData: p.json<Record<string, unknown>>(),
    createdAt: p.datetime(),
  }),
  indexes: [{ properties: ['instanceId', 'eventName', 'createdAt'] }],
});
export type PendingEvent = InferEntity<typeof PendingEvent>;
