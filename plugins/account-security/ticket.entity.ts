import { defineEntity, type InferEntity } from 'rpc-service/plugin';

/**
 * A sign-in stopped for a second factor (`verify`) or for enrolling one
 * (`enrol`): the person proved a first factor, and the ticket carries that to
 * the next step for a few minutes. Only the SHA-256 of its token is kept.
 */
export const SignInTicket = defineEntity({
  name: 'SignInTicket',
  tableName: 'account_security_ticket',
  properties: (p) => ({
    subscriptionId: p.uuid().primary(),
    id: p.uuid().primary(),
    userId: p.uuid(),
    tokenHash: p.text().unique(),
    /** `verify` or `enrol`. */
    purpose: p.text(),
    /** What the first factor was, space-separated (the session's amr). */
    amr: p.text(),
    /** The sign-in's door's own (AuthRpc's SignInResume): an external login to hand the session to. */
    resume: p.json<{ externalLoginId?: string }>(),
    clientIp: p.text(),
    userAgent: p.text().nullable(),
    createdAt: p.datetime(),
    expiresAt: p.datetime().index(),
    /** Set while a request finishes the sign-in (checks its factor): another waits, so one code or passkey is never spent by a request that then fails. */
    claimedUntil: p.datetime().nullable(),
  }),
});
export type SignInTicket = InferEntity<typeof SignInTicket>;
