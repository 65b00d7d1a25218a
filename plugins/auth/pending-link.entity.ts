import { defineEntity } from 'rpc-service/plugin';

/**
 * A provider sign-in waiting for its person to answer whether to join an
 * existing account whose address its owner never proved (oauth.service.ts):
 * the browser holds the token (a cookie), only its hash is kept. Nothing is
 * linked until the answer; unanswered, it ends with the login's ten minutes.
 */
export const PendingLink = defineEntity({
  name: 'PendingLink',
  tableName: 'auth_pending_link',
  properties: (p) => ({
    tokenHash: p.text().primary(),
    provider: p.text(),
    subject: p.text(),
    /** The provider's verified address, lowercased: the account must still have it when the person joins. */
    email: p.text(),
    userId: p.uuid(),
    externalLoginId: p.uuid().nullable(),
    expiresAt: p.datetime(),
  }),
});
