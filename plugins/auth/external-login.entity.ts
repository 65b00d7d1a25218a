import { defineEntity, type InferEntity } from 'rpc-service/plugin';

/** A login started for another program (a desktop app) that polls for its result. */
export const ExternalLogin = defineEntity({
  name: 'ExternalLogin',
  tableName: 'auth_external_login',
  properties: (p) => ({
    id: p.uuid().primary(),
    provider: p.text(),
    pollTokenHash: p.text(),
    /** The session token, sealed, until the polling program collects it once. */
    sessionToken: p.text().nullable(),
    userId: p.uuid().nullable(),
    completedAt: p.datetime().nullable(),
    consumedAt: p.datetime().nullable(),
    expiresAt: p.datetime(),
    createdAt: p.datetime(),
  }),
});
export type ExternalLogin = InferEntity<typeof ExternalLogin>;
