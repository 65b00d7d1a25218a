import { defineEntity, type InferEntity } from 'rpc-service/plugin';

/** A passkey (a WebAuthn credential) a user registered: its public key, never anything secret. */
export const Passkey = defineEntity({
  name: 'Passkey',
  tableName: 'account_security_passkey',
  properties: (p) => ({
    subscriptionId: p.uuid().primary(),
    id: p.uuid().primary(),
    userId: p.uuid().index(),
    /** The credential's id as the authenticator gave it (base64url): unique in the whole service, as a sign-in without a username finds its user by it. */
    credentialId: p.text().unique(),
    /** The COSE public key, base64url. */
    publicKey: p.text(),
    /** The authenticator's signature counter; a counter that goes back means a cloned authenticator, and the sign-in is refused. */
    counter: p.bigint('number'),
    /** How the browser may reach it (usb, internal, hybrid, ...), space-separated. */
    transports: p.text().default(''),
    /** `singleDevice`, or `multiDevice` for a passkey synced between devices. */
    deviceType: p.text(),
    backedUp: p.boolean(),
    /** The authenticator model's AAGUID (all zeros when attestation is none). */
    aaguid: p.text(),
    name: p.text(),
    createdAt: p.datetime(),
    lastUsedAt: p.datetime().nullable(),
  }),
});
export type Passkey = InferEntity<typeof Passkey>;
