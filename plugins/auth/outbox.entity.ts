import { defineEntity, type InferEntity } from 'rpc-service/plugin';

/** A message for a channel with no delivery configured, for the operator to read (written by message-sender.ts). */
export const OutboxMessage = defineEntity({
  name: 'OutboxMessage',
  tableName: 'auth_outbox',
  properties: (p) => ({
    id: p.uuid().primary(),
    channel: p.text(),
    recipient: p.text(),
    subject: p.text(),
    body: p.text(),
    createdAt: p.datetime().index(),
  }),
});
export type OutboxMessage = InferEntity<typeof OutboxMessage>;
