import { defineEntity, type InferEntity } from 'rpc-service/plugin';

/**
 * An authenticator app (TOTP, RFC 6238) of a user: its shared secret,
 * encrypted under the master key. Unconfirmed while its enrolment waits for
 * the first code; a user has at most one confirmed.
 */
export const Authenticator = defineEntity({
  name: 'Authenticator',
  tableName: 'account_security_authenticator',
  properties: (p) => ({
    subscriptionId: p.uuid().primary(),
    id: p.uuid().primary(),
    userId: p.uuid().index(),
    /** The base32 secret, encrypted (SecretBox). */
    secret: p.text(),
    /** Null until a first code confirmed the enrolment. */
    confirmedAt: p.datetime().nullable(),
    /** The time step of the last code accepted: a code of that step or an earlier one is refused, so each is used once. */
    lastStep: p.integer().nullable(),
    createdAt: p.datetime(),
  }),
});
export type Authenticator = InferEntity<typeof Authenticator>;
