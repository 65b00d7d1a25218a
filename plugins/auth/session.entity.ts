import { defineEntity, type InferEntity } from 'rpc-service/plugin';

/**
 * A session: only the SHA-256 of its token is stored. It records how it was
 * made and from where, for the person's list of devices.
 */
export const Session = defineEntity({
  name: 'Session',
  tableName: 'auth_session',
  properties: (p) => ({
    subscriptionId: p.uuid().primary(),
    id: p.uuid().primary(),
    userId: p.uuid().index(),
    /** SHA-256 of the token, hex; the token itself is never stored. */
    tokenHash: p.text().unique(),
    createdAt: p.datetime(),
    lastSeenAt: p.datetime(),
    expiresAt: p.datetime(),
    /**
     * How the person proved who they are, space-separated (RFC 8176's names where
     * one fits): pwd, code (a one-time code by e-mail or phone), oauth, otp (an
     * authenticator app), recovery (a recovery code), webauthn (a passkey).
     */
    amr: p.text().default(''),
    /** When they last proved it with every factor they have: the sign-in, or a later step-up. */
    signedInAt: p.datetime(),
    /** The client address and User-Agent it was made from. */
    ipAddress: p.text().nullable(),
    userAgent: p.text().nullable(),
  }),
});
export type Session = InferEntity<typeof Session>;
