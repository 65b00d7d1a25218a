import { defineEntity, type InferEntity } from 'rpc-service/plugin';

/** A notification for one user: what the platform tells them (an assignment, an agent's answer, a broadcast). */
export const Notification = defineEntity({
  name: 'Notification',
  tableName: 'notification',
  properties: (p) => ({
    subscriptionId: p.uuid().primary(),
    id: p.uuid().primary(),
    userId: p.uuid(),
    title: p.text(),
    message: p.text(),
    read: p.boolean(),
    timestamp: p.datetime(),
    /** Who made it: a plugin's id. */
    source: p.text(),
    /** What it is about, for clients that link to it (a task's id, a scheduled task's run). */
    data: p.json<Record<string, unknown>>().nullable(),
    /** Set by a producer that may run twice (a retried job): a user gets one notification per key. */
    dedupeKey: p.text().nullable(),
  }),
  indexes: [{ properties: ['subscriptionId', 'userId', 'timestamp'] }],
  uniques: [{ properties: ['subscriptionId', 'userId', 'dedupeKey'] }],
});
export type Notification = InferEntity<typeof Notification>;
