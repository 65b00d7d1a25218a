import { defineEntity, type InferEntity } from 'rpc-service/plugin';

/** What a user let a client do: the tokens issued for it act within this, and go with it. */
export const OAuthGrant = defineEntity({
  name: 'OAuthGrant',
  tableName: 'oauth_server_grant',
  properties: (p) => ({
    subscriptionId: p.uuid().primary(),
    id: p.uuid().primary(),
    userId: p.uuid().index(),
    clientId: p.text(),
    clientName: p.text(),
    redirectUri: p.text(),
    door: p.text(),
    scopes: p.json<string[]>().nullable(),
    readOnly: p.boolean(),
    createdAt: p.datetime(),
    /** The last time a token was issued for it (a code exchanged or a refresh). */
    refreshedAt: p.datetime(),
  }),
});
export type OAuthGrant = InferEntity<typeof OAuthGrant>;
