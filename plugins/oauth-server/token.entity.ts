import { defineEntity, type InferEntity } from 'rpc-service/plugin';

/** An access or refresh token of a grant: only its SHA-256 is stored. */
export const OAuthToken = defineEntity({
  name: 'OAuthToken',
  tableName: 'oauth_server_token',
  properties: (p) => ({
    subscriptionId: p.uuid().primary(),
    id: p.uuid().primary(),
    grantId: p.uuid().index(),
    /** `access` or `refresh`. */
    kind: p.text(),
    tokenHash: p.text().unique(),
    expiresAt: p.datetime(),
    /** A refresh token is used once: set when it was exchanged, so a second use is seen as theft. */
    usedAt: p.datetime().nullable(),
  }),
});
export type OAuthToken = InferEntity<typeof OAuthToken>;
