import { defineEntity } from '@mikro-orm/core';

/** An event too large for a NOTIFY payload, read by the other nodes (core/events/bus.ts). */
export const EventPayload = defineEntity({
  name: 'EventPayload',
  tableName: 'core_event_payload',
  properties: (p) => ({
    id: p.bigint('string').primary().autoincrement(),
    body: p.json<unknown>(),
    createdAt: p.datetime().defaultRaw('now()'),
  }),
});
