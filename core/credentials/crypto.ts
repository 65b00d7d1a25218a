import { createCipheriv, createDecipheriv, createHmac, hash, hkdfSync, randomBytes, timingSafeEqual } from 'node:crypto';
import type { MasterKey, MasterKeys } from './master-key.ts';

// One-shot hashing: markedly cheaper than createHash on the per-request path.
export const sha256 = (text: string): Buffer => hash('sha256', text, 'buffer');
export const sha256Hex = (text: string): string => hash('sha256', text, 'hex');
export const randomToken = (bytes = 32): string => randomBytes(bytes).toString('base64url');

/** Compares two digests in constant time. */
export const digestsEqual = (a: Buffer, b: Buffer): boolean => a.length === b.length && a.length > 0 && timingSafeEqual(a, b);

/** AES-256-GCM with a random 96-bit IV: `<iv>.<tag>.<ciphertext>` in base64url; `aad` is authenticated, not stored. */
export function gcmSeal(key: Buffer, plaintext: string | Buffer, aad?: string): string {
  const iv = randomBytes(12);
  const cipher = createCipheriv('aes-256-gcm', key, iv);
  if (aad !== undefined) cipher.setAAD(Buffer.from(aad, 'utf8'));
  const ciphertext = Buffer.concat([cipher.update(plaintext), cipher.final()]);
  return [iv, cipher.getAuthTag(), ciphertext].map((part) => part.toString('base64url')).join('.');
}

/** Opens what gcmSeal made; throws when the key, the associated data or a single bit differs. */
export function gcmOpen(key: Buffer, sealed: string, aad?: string): Buffer {
  const [iv, tag, ciphertext, extra] = sealed.split('.');
  if (!iv || !tag || ciphertext === undefined || extra !== undefined) throw new Error('Unknown sealed value format');
  const decipher = createDecipheriv('aes-256-gcm', key, Buffer.from(iv, 'base64url'));
  if (aad !== undefined) decipher.setAAD(Buffer.from(aad, 'utf8'));
  decipher.setAuthTag(Buffer.from(tag, 'base64url'));
  return Buffer.concat([decipher.update(Buffer.from(ciphertext, 'base64url')), decipher.final()]);
}

const macKeyOf = (key: Buffer): Buffer => Buffer.from(hkdfSync('sha256', key, Buffer.alloc(0), 'rpc-service mac', 32));

/**
 * Short-lived values of no subscription (sign-in state, one-time code MACs)
 * under the master key itself: `v2.<master key id>.<iv>.<tag>.<ciphertext>`.
 * Values of a subscription go through the Keyring instead, whose data keys a
 * rotation wraps again. `v1.` values (no key id) are opened with each key.
 */
export class SecretBox {
  readonly #keys: readonly MasterKey[];
  // A separate key for MACs, derived from each master key, so no key serves two algorithms.
  readonly #macKeys: readonly Buffer[];

  constructor(keys: MasterKeys) {
    this.#keys = [keys.current, ...keys.previous];
    this.#macKeys = this.#keys.map(({ key }) => macKeyOf(key));
  }

  /**
   * HMAC-SHA256 under the current master key, hex. For short secrets such as
   * one-time codes, whose plain hash could be reversed by trying every value.
   */
  mac(text: string): string {
    return createHmac('sha256', this.#macKeys[0]!).update(text).digest('hex');
  }

  /** Whether `macHex` is the MAC of `text` under the current or a previous master key, compared in constant time. */
  macMatches(text: string, macHex: string): boolean {
    const stored = Buffer.from(macHex, 'hex');
    return this.#macKeys.some((key) => digestsEqual(createHmac('sha256', key).update(text).digest(), stored));
  }

  encrypt(plaintext: string): string {
    const { id, key } = this.#keys[0]!;
    return `v2.${id}.${gcmSeal(key, plaintext)}`;
  }

  decrypt(sealed: string): string {
    const version = sealed.slice(0, 3);
    if (version === 'v2.') {
      const dot = sealed.indexOf('.', 3);
      const master = this.#keys.find(({ id }) => id === sealed.slice(3, dot));
      if (!master) throw new Error('Sealed by a master key that is not configured');
      return gcmOpen(master.key, sealed.slice(dot + 1)).toString('utf8');
    }
    if (version !== 'v1.') throw new Error('Unknown sealed value format');
    for (const { key } of this.#keys) {
      try {
        return gcmOpen(key, sealed.slice(3)).toString('utf8');
      } catch {
        // Sealed by another of the keys, or damaged: the last key decides.
      }
    }
    throw new Error('No configured master key opens this value');
  }
}
