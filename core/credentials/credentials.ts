import { BUS_RESYNC, type EventBus } from '../events/bus.ts';
import { CredentialCache } from './credential-cache.ts';
import { concerns, CREDENTIALS_CHANGED, type CredentialsChanged } from './revocation.ts';

/**
 * The core service behind every credential scheme: caches of verified
 * credentials that every node empties when a credential changes, and the
 * announcement of such a change.
 */
export class Credentials {
  readonly #bus: EventBus;
  readonly #ttlMs: number;
  readonly #caches: CredentialCache[] = [];

  constructor({ bus, cacheTtlSeconds }: { bus: EventBus; cacheTtlSeconds: number }) {
    this.#bus = bus;
    this.#ttlMs = cacheTtlSeconds * 1000;
    bus.subscribe(CREDENTIALS_CHANGED, (event) => {
      const match = concerns(event.payload as CredentialsChanged);
      for (const cache of this.#caches) cache.deleteWhere(match);
    });
    // Changes may have been missed while the fan-out was down: start over.
    bus.subscribe(BUS_RESYNC, () => {
      for (const cache of this.#caches) cache.clear();
    });
  }

  /** A cache for one credential scheme, trusted for AUTH_CACHE_TTL_SECONDS and emptied on every change. */
  createCache(): CredentialCache {
    const cache = new CredentialCache(this.#ttlMs);
    this.#caches.push(cache);
    return cache;
  }

  /** Changes whenever a cached credential is dropped; a check that spans a change must be repeated. */
  get generation(): number {
    let sum = 0;
    for (const cache of this.#caches) sum += cache.generation;
    return sum;
  }

  /**
   * Announces that a credential changed or ended (key edited or deleted,
   * logout, user deactivated ...): every node drops what it cached for it and
   * re-checks the WebSockets that use it.
   */
  changed(change: CredentialsChanged): Promise<void> {
    return this.#bus.publish({ name: CREDENTIALS_CHANGED, payload: change });
  }
}
