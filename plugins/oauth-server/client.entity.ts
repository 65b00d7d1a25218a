import { defineEntity, type InferEntity } from 'rpc-service/plugin';

/**
 * A client registered by dynamic client registration (RFC 7591). Clients that
 * name themselves by a Client ID Metadata Document are not stored: their
 * document is fetched at each authorization. Of no subscription: a client is
 * known before anyone signs in.
 */
export const OAuthClient = defineEntity({
  name: 'OAuthClient',
  tableName: 'oauth_server_client',
  properties: (p) => ({
    id: p.text().primary(),
    name: p.text(),
    /** The client's home page, shown on the consent page when given. */
    uri: p.text().nullable(),
    redirectUris: p.json<string[]>(),
    createdAt: p.datetime(),
  }),
});
export type OAuthClient = InferEntity<typeof OAuthClient>;
