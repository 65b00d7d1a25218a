import { defineEntity, type InferEntity } from 'rpc-service/plugin';

/** A session: only the SHA-256 of its token is stored. */
export const Session = defineEntity({
  name: 'Session',
  tableName: 'auth_session',
  properties: (p) => ({
    subscriptionId: p.uuid().primary(),
    id: p.uuid().primary(),
    userId: p.uuid().index(),
    /** SHA-256 of the token, hex; the token itself is never stored. */
    tokenHash: p.text().unique(),
    createdAt: p.datetime(),
    lastSeenAt: p.datetime(),
    expiresAt: p.datetime(),
  }),
});
export type Session = InferEntity<typeof Session>;
