import { defineEntity, type InferEntity } from 'rpc-service/plugin';

/**
 * A sign-in waiting for its person to answer whether to join an existing
 * account whose address its owner never proved (join.service.ts): a provider's
 * sign-in (`provider` and `subject`, to be linked) or a one-time code sent to
 * the address (neither). The browser holds the token (a cookie), only its hash
 * is kept. Nothing changes until the answer; unanswered, it ends in ten minutes.
 */
export const PendingLink = defineEntity({
  name: 'PendingLink',
  tableName: 'auth_pending_link',
  properties: (p) => ({
    tokenHash: p.text().primary(),
    provider: p.text().nullable(),
    subject: p.text().nullable(),
    /** The address the person proved, lowercased: the account must still have it when the person joins. */
    email: p.text(),
    userId: p.uuid(),
    externalLoginId: p.uuid().nullable(),
    expiresAt: p.datetime(),
  }),
});
export type PendingLink = InferEntity<typeof PendingLink>;
