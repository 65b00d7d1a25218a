import { defineEntity, type InferEntity } from 'rpc-service/plugin';

/** A login in progress at an OpenID provider: state (hashed), PKCE verifier (sealed), nonce. */
export const OAuthState = defineEntity({
  name: 'OAuthState',
  tableName: 'auth_oauth_state',
  properties: (p) => ({
    stateHash: p.text().primary(),
    provider: p.text(),
    codeVerifier: p.text(),
    nonce: p.text(),
    externalLoginId: p.uuid().nullable(),
    expiresAt: p.datetime(),
  }),
});
export type OAuthState = InferEntity<typeof OAuthState>;
