import { randomInt, randomUUID } from 'node:crypto';
import { sha256Hex, type EntityManager } from 'rpc-service/plugin';
import { RecoveryCode } from './recovery-code.entity.ts';

/** Ten codes a person keeps somewhere safe, for when they have none of their factors at hand. */
export const RECOVERY_CODE_COUNT = 10;

// Lowercase letters and digits a person cannot misread for another (no 0/o, 1/l/i): 31 symbols, 10 of them ≈ 49 bits.
const ALPHABET = 'abcdefghjkmnpqrstuvwxyz23456789';

/** A code as it is shown: `xxxxx-xxxxx`. */
function newCode(): string {
  const symbols = Array.from({ length: 10 }, () => ALPHABET[randomInt(ALPHABET.length)]).join('');
  return `${symbols.slice(0, 5)}-${symbols.slice(5)}`;
}

/** What a person typed, as it was hashed: lowercase, without spaces or dashes. */
const normalised = (code: string): string => code.toLowerCase().replace(/[\s-]/g, '');

/**
 * Recovery codes: made ten at a time (the earlier ones end), shown once,
 * kept as SHA-256 (they are random enough that a plain hash cannot be
 * searched), each used once.
 */
export class RecoveryCodes {
  /** Replaces the user's codes with ten new ones, in the caller's transaction; answers them as shown. */
  async issue(em: EntityManager, subscriptionId: string, userId: string): Promise<string[]> {
    await em.nativeDelete(RecoveryCode, { subscriptionId, userId });
    const codes = Array.from({ length: RECOVERY_CODE_COUNT }, newCode);
    const createdAt = new Date();
    for (const code of codes) {
      em.create(RecoveryCode, { subscriptionId, id: randomUUID(), userId, codeHash: sha256Hex(normalised(code)), createdAt, usedAt: null });
    }
    await em.flush();
    return codes;
  }

  /** Uses a code: true when it was one of the user's, unused; it is then used up (one statement, so two uses at once cannot both pass). */
  async use(em: EntityManager, subscriptionId: string, userId: string, code: string): Promise<boolean> {
    const used = await em.nativeUpdate(RecoveryCode, { subscriptionId, userId, codeHash: sha256Hex(normalised(code)), usedAt: null }, { usedAt: new Date() });
    return used > 0;
  }

  /** How many unused codes the user has. */
  left(em: EntityManager, subscriptionId: string, userId: string): Promise<number> {
    return em.count(RecoveryCode, { subscriptionId, userId, usedAt: null });
  }

  async removeAll(em: EntityManager, subscriptionId: string, userId: string): Promise<void> {
    await em.nativeDelete(RecoveryCode, { subscriptionId, userId });
  }
}
