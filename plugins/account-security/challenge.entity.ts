import { defineEntity, type InferEntity } from 'rpc-service/plugin';

/**
 * A WebAuthn challenge handed to a browser, used once and within minutes. A
 * sign-in without a username has no tenant yet, so challenges belong to no
 * tenant: whom they are for is in `for…` columns.
 */
export const PasskeyChallenge = defineEntity({
  name: 'PasskeyChallenge',
  tableName: 'account_security_challenge',
  properties: (p) => ({
    id: p.uuid().primary(),
    challenge: p.text(),
    /** `register`, `sign-in` (no username), `second-factor` (a ticket's) or `step-up` (a session's). */
    purpose: p.text(),
    forSubscriptionId: p.uuid().nullable(),
    forUserId: p.uuid().nullable(),
    /** The ticket (second-factor, or register during an enrolment) or session (step-up, register) it was asked with. */
    ticketId: p.uuid().nullable(),
    sessionId: p.uuid().nullable(),
    /** The origin and relying party id the browser must have used. */
    origin: p.text(),
    rpId: p.text(),
    expiresAt: p.datetime().index(),
  }),
});
export type PasskeyChallenge = InferEntity<typeof PasskeyChallenge>;
