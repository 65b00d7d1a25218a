import { randomUUID } from 'node:crypto';
import { Secret, TOTP } from 'otpauth';
import { notFound, type EntityManager, type Keyring } from 'rpc-service/plugin';
import { Authenticator } from './authenticator.entity.ts';

/** RFC 6238 as authenticator apps read an otpauth:// URI by default: SHA-1, six digits, 30 seconds. */
const PERIOD_SECONDS = 30;
/** A code of the step before or after the current one is accepted too, for clocks a little apart. */
const WINDOW = 1;
/** An enrolment not confirmed within this is forgotten. */
const ENROLMENT_SECONDS = 15 * 60;

export interface Enrolment {
  enrolmentId: string;
  /** The secret in base32, for typing into an app by hand. */
  secret: string;
  /** The otpauth:// URI the console draws as a QR code. */
  uri: string;
  expiresAt: string;
}

/**
 * Authenticator apps (TOTP). The secret is sealed with the subscription's
 * data key (Keyring); a code is accepted once: its time step must come after
 * the last accepted one. The keyring may use a connection of its own, so
 * secrets are sealed and opened outside any transaction.
 */
export class Authenticators {
  readonly #keyring: Keyring;

  constructor(keyring: Keyring) {
    this.#keyring = keyring;
  }

  /** A new secret, unconfirmed until `confirm`; an earlier unconfirmed one of the user goes. */
  async begin(em: EntityManager, user: { subscriptionId: string; id: string; label: string }, issuer: string): Promise<Enrolment> {
    await em.nativeDelete(Authenticator, { subscriptionId: user.subscriptionId, userId: user.id, confirmedAt: null });
    const id = randomUUID();
    const secret = new Secret({ size: 20 });
    const sealed = await this.#keyring.seal(user.subscriptionId, secret.base32);
    const createdAt = new Date();
    em.create(Authenticator, {
      subscriptionId: user.subscriptionId,
      id,
      userId: user.id,
      secret: sealed,
      confirmedAt: null,
      lastStep: null,
      createdAt,
    });
    await em.flush();
    const uri = totpOf(secret.base32, issuer, user.label).toString();
    return { enrolmentId: id, secret: secret.base32, uri, expiresAt: new Date(createdAt.getTime() + ENROLMENT_SECONDS * 1000).toISOString() };
  }

  /**
   * Confirms an enrolment with its first code: it becomes the user's
   * authenticator, replacing any earlier one. False for a wrong code;
   * NOT_FOUND when there is no such enrolment (or it expired).
   */
  async confirm(em: EntityManager, subscriptionId: string, userId: string, enrolmentId: string, code: string): Promise<boolean> {
    const pending = await em.findOne(Authenticator, { subscriptionId, id: enrolmentId, userId, confirmedAt: null });
    if (!pending || pending.createdAt.getTime() + ENROLMENT_SECONDS * 1000 < Date.now()) {
      throw notFound('No such enrolment: it was confirmed, replaced or has expired; begin again');
    }
    const step = await this.#stepOf(pending, code);
    if (step === undefined) return false;
    await em.nativeDelete(Authenticator, { subscriptionId, userId, id: { $ne: enrolmentId } });
    pending.confirmedAt = new Date();
    pending.lastStep = step;
    await em.flush();
    return true;
  }

  /** Whether the code is the user's confirmed authenticator's, for a step not used before; it is then used. */
  async verify(em: EntityManager, subscriptionId: string, userId: string, code: string): Promise<boolean> {
    const confirmed = await this.confirmedOf(em, subscriptionId, userId);
    if (!confirmed) return false;
    const step = await this.#stepOf(confirmed, code);
    if (step === undefined) return false;
    // Taken in one statement: two requests with the same code at once cannot both pass.
    const taken = await em.nativeUpdate(
      Authenticator,
      { subscriptionId, id: confirmed.id, $or: [{ lastStep: null }, { lastStep: { $lt: step } }] },
      { lastStep: step },
    );
    return taken > 0;
  }

  confirmedOf(em: EntityManager, subscriptionId: string, userId: string): Promise<Authenticator | null> {
    return em.findOne(Authenticator, { subscriptionId, userId, confirmedAt: { $ne: null } });
  }

  /** Removes the user's authenticator (and any enrolment); false when they had none confirmed. */
  async remove(em: EntityManager, subscriptionId: string, userId: string): Promise<boolean> {
    const had = await this.confirmedOf(em, subscriptionId, userId);
    await em.nativeDelete(Authenticator, { subscriptionId, userId });
    return had !== null;
  }

  /** The time step the code belongs to, within the window around now; undefined when it is none of them. */
  async #stepOf(row: Authenticator, code: string): Promise<number | undefined> {
    const token = code.replace(/\s/g, '');
    if (!/^\d{6}$/.test(token)) return undefined;
    const totp = totpOf(await this.#keyring.open(row.subscriptionId, row.secret), '', '');
    const delta = totp.validate({ token, window: WINDOW });
    if (delta === null) return undefined;
    const step = totp.counter() + delta;
    return row.lastStep !== null && row.lastStep !== undefined && step <= row.lastStep ? undefined : step;
  }
}

const totpOf = (base32: string, issuer: string, label: string) =>
  new TOTP({ issuer, label, algorithm: 'SHA1', digits: 6, period: PERIOD_SECONDS, secret: Secret.fromBase32(base32) });
