import { randomUUID } from 'node:crypto';
import type {
  AuthenticationResponseJSON,
  AuthenticatorTransportFuture,
  PublicKeyCredentialCreationOptionsJSON,
  PublicKeyCredentialRequestOptionsJSON,
  RegistrationResponseJSON,
} from '@simplewebauthn/server';
import type * as WebAuthn from '@simplewebauthn/server';
import * as v from 'valibot';
import {
  notFound,
  RpcError,
  unauthenticated,
  validationError,
  wireTimestamp,
  type Database,
  type EntityManager,
  type Logger,
  type RowOf,
} from 'rpc-service/plugin';
import { PasskeyChallenge } from './challenge.entity.ts';
import { Passkey } from './passkey.entity.ts';

/**
 * The WebAuthn library with its certificate and ASN.1 packages is a tenth of
 * the JavaScript the service loads at start, and a ceremony is rare: loaded
 * at the first one (docs/decisions/0066-runtimes-and-start-up.md).
 */
let webauthn: Promise<typeof WebAuthn> | undefined;
const webAuthn = () => (webauthn ??= import('@simplewebauthn/server'));

/** How long a browser has to answer a challenge (the ceremony's own timeout, and the row's life). */
const CHALLENGE_SECONDS = 5 * 60;

export type ChallengePurpose = 'register' | 'sign-in' | 'second-factor' | 'step-up';

/** Who a challenge is for, and what it was asked with: all checked again when it is answered. */
export interface ChallengeOwner {
  subscriptionId: string | null;
  userId: string | null;
  ticketId: string | null;
  sessionId: string | null;
}

/** The relying party a ceremony runs for: the service's origin (PUBLIC_URL, else the address the request came to) and its host. */
export interface RelyingParty {
  origin: string;
  rpId: string;
  name: string;
}

export const relyingPartyOf = (baseUrl: string, name: string): RelyingParty => {
  const url = new URL(baseUrl);
  return { origin: url.origin, rpId: url.hostname, name };
};

const b64url = v.pipe(v.string(), v.maxLength(16_384), v.regex(/^[A-Za-z0-9_-]*={0,2}$/, 'must be base64url'));
/** A credential id: at most 1023 bytes (WebAuthn), 1364 characters of base64url. */
const credentialId = v.pipe(v.string(), v.maxLength(1364), v.regex(/^[A-Za-z0-9_-]*={0,2}$/, 'must be base64url'));
const transports = v.optional(v.pipe(v.array(v.pipe(v.string(), v.maxLength(32))), v.maxLength(10)));

/** What `navigator.credentials.create()` answers, as `PublicKeyCredential.toJSON()` gives it. */
export const REGISTRATION_RESPONSE = v.looseObject({
  id: credentialId,
  rawId: credentialId,
  type: v.literal('public-key'),
  response: v.looseObject({ clientDataJSON: b64url, attestationObject: b64url, transports }),
  clientExtensionResults: v.optional(v.record(v.string(), v.unknown()), {}),
  authenticatorAttachment: v.optional(v.pipe(v.string(), v.maxLength(32))),
});

/** What `navigator.credentials.get()` answers, as `PublicKeyCredential.toJSON()` gives it. */
export const AUTHENTICATION_RESPONSE = v.looseObject({
  id: credentialId,
  rawId: credentialId,
  type: v.literal('public-key'),
  response: v.looseObject({
    clientDataJSON: b64url,
    authenticatorData: b64url,
    signature: b64url,
    userHandle: v.optional(v.nullable(b64url)),
  }),
  clientExtensionResults: v.optional(v.record(v.string(), v.unknown()), {}),
  authenticatorAttachment: v.optional(v.pipe(v.string(), v.maxLength(32))),
});

/** A passkey as its person sees it: never its key. */
export const PASSKEY_VIEW = v.strictObject({
  id: v.string(),
  name: v.string(),
  createdAt: wireTimestamp,
  lastUsedAt: v.nullable(wireTimestamp),
  /** `singleDevice`, or `multiDevice` when the passkey is synced between devices. */
  deviceType: v.string(),
  backedUp: v.boolean(),
});
export type PasskeyView = v.InferOutput<typeof PASSKEY_VIEW>;

export const passkeyView = (passkey: Passkey): PasskeyView => ({
  id: passkey.id,
  name: passkey.name,
  createdAt: passkey.createdAt.toISOString(),
  lastUsedAt: passkey.lastUsedAt?.toISOString() ?? null,
  deviceType: passkey.deviceType,
  backedUp: passkey.backedUp,
});

/** A ceremony's options as the browser takes them (PublicKeyCredential.parse…OptionsFromJSON), with the id of the challenge to answer. */
export interface Ceremony {
  challengeId: string;
  options: Record<string, unknown>;
}

const asJson = (options: PublicKeyCredentialCreationOptionsJSON | PublicKeyCredentialRequestOptionsJSON): Record<string, unknown> =>
  options as unknown as Record<string, unknown>;

/** A user's passkeys at most: registration past it is refused. */
export const MAX_PASSKEYS = 20;

/**
 * Passkeys (WebAuthn) with @simplewebauthn/server: registration (attestation
 * none, discoverable credentials, user verification preferred), and
 * assertions for a sign-in without a username, a second factor and a
 * step-up. Each challenge is stored with who asked it and used once.
 */
export class Passkeys {
  readonly #db: Database;
  readonly #logger: Logger;

  constructor(db: Database, logger: Logger) {
    this.#db = db;
    this.#logger = logger;
  }

  async registrationOptions(
    rp: RelyingParty,
    user: { subscriptionId: string; id: string; username: string; displayName: string },
    owner: ChallengeOwner,
  ): Promise<Ceremony> {
    const existing = await this.#db.forkEm(user.subscriptionId).find(Passkey, { userId: user.id });
    if (existing.length >= MAX_PASSKEYS) throw new RpcError('CONFLICT', `A user may have at most ${MAX_PASSKEYS} passkeys; remove one first`);
    const { generateRegistrationOptions } = await webAuthn();
    const options = await generateRegistrationOptions({
      rpName: rp.name,
      rpID: rp.rpId,
      userName: user.username,
      userDisplayName: user.displayName,
      userID: new TextEncoder().encode(user.id),
      timeout: CHALLENGE_SECONDS * 1000,
      attestationType: 'none',
      excludeCredentials: existing.map((passkey) => ({ id: passkey.credentialId, transports: transportsOf(passkey) })),
      authenticatorSelection: { residentKey: 'required', userVerification: 'preferred' },
    });
    return { challengeId: await this.#challenge(options.challenge, 'register', rp, owner), options: asJson(options) };
  }

  /** Registers the passkey a browser made for a challenge of `register`; answers it. */
  async register(challengeId: string, owner: ChallengeOwner, response: RegistrationResponseJSON, name: string): Promise<Passkey> {
    const challenge = await this.#take(challengeId, ['register'], owner);
    const { verifyRegistrationResponse } = await webAuthn();
    let verified;
    try {
      verified = await verifyRegistrationResponse({
        response,
        expectedChallenge: challenge.challenge,
        expectedOrigin: challenge.origin,
        expectedRPID: challenge.rp_id,
        requireUserVerification: false,
      });
    } catch (err) {
      this.#logger.info({ err }, 'passkey registration refused');
      throw validationError([{ path: 'response', message: `The passkey could not be verified: ${(err as Error).message}` }]);
    }
    if (!verified.verified) throw validationError([{ path: 'response', message: 'The passkey could not be verified' }]);
    const info = verified.registrationInfo;
    // WebAuthn's credential ids are at most 1023 bytes; the authenticator's data, which the client sends, could say more.
    if (Buffer.from(info.credential.id, 'base64url').length > 1023) {
      throw validationError([{ path: 'response', message: 'The credential id is longer than WebAuthn allows' }]);
    }
    const em = this.#db.forkEm(challenge.for_subscription_id!);
    const passkey = em.create(Passkey, {
      subscriptionId: challenge.for_subscription_id!,
      id: randomUUID(),
      userId: challenge.for_user_id!,
      credentialId: info.credential.id,
      publicKey: Buffer.from(info.credential.publicKey).toString('base64url'),
      counter: info.credential.counter,
      transports: (info.credential.transports ?? []).join(' '),
      deviceType: info.credentialDeviceType,
      backedUp: info.credentialBackedUp,
      aaguid: info.aaguid,
      name,
      createdAt: new Date(),
      lastUsedAt: null,
    });
    try {
      await em.flush();
    } catch (err) {
      if ((err as { name?: string }).name === 'UniqueConstraintViolationException') {
        throw new RpcError('CONFLICT', 'This passkey is already registered');
      }
      throw err;
    }
    return passkey;
  }

  /**
   * Options for an assertion: with a user, only their passkeys are offered
   * (a second factor, a step-up); without, any passkey of this site (a
   * sign-in without a username, from the authenticator's discoverable credentials).
   */
  async authenticationOptions(rp: RelyingParty, purpose: Exclude<ChallengePurpose, 'register'>, owner: ChallengeOwner): Promise<Ceremony> {
    const allowed = owner.userId && owner.subscriptionId ? await this.#db.forkEm(owner.subscriptionId).find(Passkey, { userId: owner.userId }) : undefined;
    if (allowed?.length === 0) throw new RpcError('BAD_REQUEST', 'This account has no passkey');
    const { generateAuthenticationOptions } = await webAuthn();
    const options = await generateAuthenticationOptions({
      rpID: rp.rpId,
      timeout: CHALLENGE_SECONDS * 1000,
      // A passkey that signs in alone must be more than possession: the device checks its person (a PIN, a fingerprint).
      userVerification: purpose === 'sign-in' ? 'required' : 'preferred',
      ...(allowed ? { allowCredentials: allowed.map((passkey) => ({ id: passkey.credentialId, transports: transportsOf(passkey) })) } : {}),
    });
    return { challengeId: await this.#challenge(options.challenge, purpose, rp, owner), options: asJson(options) };
  }

  /**
   * Checks an assertion against its challenge and the passkey it names;
   * answers the passkey, its counter and last use brought up to date.
   * UNAUTHENTICATED for anything that does not hold (one message for all, so
   * nothing tells which part failed).
   */
  async authenticate(
    challengeId: string,
    purposes: readonly ChallengePurpose[],
    owner: Partial<ChallengeOwner>,
    response: AuthenticationResponseJSON,
  ): Promise<{ passkey: Passkey; challenge: ChallengeRow }> {
    const challenge = await this.#take(challengeId, purposes, owner);
    const refused = unauthenticated('This passkey was not accepted');
    const [row] = await this.#db.execute<{ subscription_id: string; id: string }>(
      'select subscription_id, id from account_security_passkey where credential_id = ?',
      [response.id],
    );
    if (!row || (challenge.for_subscription_id && row.subscription_id !== challenge.for_subscription_id)) throw refused;
    const em = this.#db.forkEm(row.subscription_id);
    const passkey = await em.findOne(Passkey, { subscriptionId: row.subscription_id, id: row.id });
    if (!passkey || (challenge.for_user_id && passkey.userId !== challenge.for_user_id)) throw refused;
    // A sign-in without a username learns the user from the passkey; the authenticator's user handle must agree.
    const handle = response.response.userHandle;
    if (handle && Buffer.from(handle, 'base64url').toString('utf8') !== passkey.userId) throw refused;
    const { verifyAuthenticationResponse } = await webAuthn();
    let verified;
    try {
      verified = await verifyAuthenticationResponse({
        response,
        expectedChallenge: challenge.challenge,
        expectedOrigin: challenge.origin,
        expectedRPID: challenge.rp_id,
        credential: {
          id: passkey.credentialId,
          publicKey: Buffer.from(passkey.publicKey, 'base64url'),
          counter: passkey.counter,
          transports: transportsOf(passkey),
        },
        requireUserVerification: challenge.purpose === 'sign-in',
      });
    } catch (err) {
      this.#logger.info({ err, passkeyId: passkey.id }, 'passkey assertion refused');
      throw refused;
    }
    if (!verified.verified) throw refused;
    passkey.counter = verified.authenticationInfo.newCounter;
    passkey.backedUp = verified.authenticationInfo.credentialBackedUp;
    passkey.lastUsedAt = new Date();
    await em.flush();
    return { passkey, challenge };
  }

  list(em: EntityManager, userId: string): Promise<Passkey[]> {
    return em.find(Passkey, { userId }, { orderBy: { createdAt: 'asc', id: 'asc' } });
  }

  count(em: EntityManager, userId: string): Promise<number> {
    return em.count(Passkey, { userId });
  }

  async removeAll(em: EntityManager, subscriptionId: string, userId: string): Promise<void> {
    await em.nativeDelete(Passkey, { subscriptionId, userId });
  }

  async #challenge(challenge: string, purpose: ChallengePurpose, rp: RelyingParty, owner: ChallengeOwner): Promise<string> {
    const id = randomUUID();
    const em = this.#db.forkEm(null);
    // Challenges nobody answered are dropped as new ones are made: they are few, and all have expired.
    await em.nativeDelete(PasskeyChallenge, { expiresAt: { $lt: new Date() } });
    em.create(PasskeyChallenge, {
      id,
      challenge,
      purpose,
      forSubscriptionId: owner.subscriptionId,
      forUserId: owner.userId,
      ticketId: owner.ticketId,
      sessionId: owner.sessionId,
      origin: rp.origin,
      rpId: rp.rpId,
      expiresAt: new Date(Date.now() + CHALLENGE_SECONDS * 1000),
    });
    await em.flush();
    return id;
  }

  /**
   * Uses a challenge up: it must be unexpired, of one of the purposes, and
   * asked by the same owner; anyone else's is not found, and stays for its owner.
   */
  async #take(challengeId: string, purposes: readonly ChallengePurpose[], owner: Partial<ChallengeOwner>): Promise<ChallengeRow> {
    // An owner's part left undefined is not checked (a sign-in learns its user from the passkey); null must be null.
    const parts = (
      [
        ['for_subscription_id', owner.subscriptionId],
        ['for_user_id', owner.userId],
        ['ticket_id', owner.ticketId],
        ['session_id', owner.sessionId],
      ] as const
    ).filter(([, value]) => value !== undefined);
    const [challenge] = await this.#db.execute<ChallengeRow>(
      `delete from account_security_challenge where id = ? and expires_at > now() and purpose in (?)
       ${parts.map(([column]) => `and ${column} is not distinct from ?`).join(' ')}
       returning challenge, purpose, for_subscription_id, for_user_id, ticket_id, session_id, origin, rp_id`,
      [challengeId, purposes, ...parts.map(([, value]) => value ?? null)],
    );
    if (!challenge) throw notFound('This passkey challenge is unknown, was used or has expired; begin again');
    return challenge;
  }
}

export type ChallengeRow = RowOf<PasskeyChallenge, 'challenge' | 'purpose' | 'forSubscriptionId' | 'forUserId' | 'ticketId' | 'sessionId' | 'origin' | 'rpId'>;

const transportsOf = (passkey: Passkey): AuthenticatorTransportFuture[] => passkey.transports.split(' ').filter(Boolean) as AuthenticatorTransportFuture[];
