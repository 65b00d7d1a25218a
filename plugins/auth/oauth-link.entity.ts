import { defineEntity, type InferEntity } from 'rpc-service/plugin';

/**
 * A provider account (provider and its subject, the OIDC `sub`) linked to a
 * user. The key makes one provider account sign in at most one user in the
 * whole service; only the OAuth login makes a link (oauth.service.ts).
 */
export const OAuthLink = defineEntity({
  name: 'OAuthLink',
  tableName: 'auth_oauth_link',
  properties: (p) => ({
    provider: p.text().primary(),
    subject: p.text().primary(),
    userId: p.uuid().index(),
    subscriptionId: p.uuid(),
    /** The verified address the provider gave when the link was made. */
    email: p.text().nullable(),
    createdAt: p.datetime(),
  }),
});
export type OAuthLink = InferEntity<typeof OAuthLink>;
