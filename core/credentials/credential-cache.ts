import type { Principal } from '../base/context.ts';

export interface CachedCredential {
  principal: Principal;
  /** API keys: what the presented key must hash to (SHA-256); sessions are looked up by their hash. */
  secretHash?: Buffer;
  /** Sessions only: when the session ends unless it is used again. */
  expiresAt: Date | null;
  lastSeenAt: Date | null;
}

interface Entry extends CachedCredential {
  /** After this the entry is read again from the database, even without an invalidation event. */
  staleAt: number;
}

/**
 * Verified credentials kept in memory so that a steady stream of calls costs
 * no database round trip. Entries are dropped by invalidation events (which
 * reach every node through the event fan-out) and after a short TTL.
 */
export class CredentialCache {
  readonly #entries = new Map<string, Entry>();
  readonly #ttlMs: number;
  readonly #maxEntries: number;
  /** Bumped by every removal: a fill that began before a removal must not put back what was removed. */
  #generation = 0;

  constructor(ttlMs: number, maxEntries = 50_000) {
    this.#ttlMs = ttlMs;
    this.#maxEntries = maxEntries;
  }

  get(key: string): CachedCredential | undefined {
    const entry = this.#entries.get(key);
    if (entry && entry.staleAt <= Date.now()) {
      this.#entries.delete(key);
      return undefined;
    }
    return entry;
  }

  get generation(): number {
    return this.#generation;
  }

  /** Caches what was read from the database, unless something was invalidated since `readAt` (a generation). */
  set(key: string, entry: CachedCredential, readAt: number): void {
    if (readAt !== this.#generation || this.#ttlMs <= 0) return;
    this.#entries.delete(key);
    if (this.#entries.size >= this.#maxEntries) this.#entries.delete(this.#entries.keys().next().value!);
    this.#entries.set(key, Object.assign(entry, { staleAt: Date.now() + this.#ttlMs }));
  }

  delete(key: string): void {
    this.#generation += 1;
    this.#entries.delete(key);
  }

  /** Drops every entry whose principal matches (a user deactivated, a key disabled ...). */
  deleteWhere(match: (principal: Principal) => boolean): void {
    this.#generation += 1;
    for (const [key, entry] of this.#entries) if (match(entry.principal)) this.#entries.delete(key);
  }

  clear(): void {
    this.#generation += 1;
    this.#entries.clear();
  }
}
