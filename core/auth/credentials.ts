import type { IncomingHttpHeaders } from 'node:http';
import { BUS_RESYNC, type EventBus } from '../events/bus.ts';
import type { Principal } from '../rpc/context.ts';
import type { ApiKeyService } from './api-keys.ts';
import { concerns, CREDENTIALS_CHANGED, type CredentialsChanged } from './revocation.ts';
import type { SessionService } from './sessions.ts';

export const SESSION_COOKIE = 'session';

export interface PresentedCredentials {
  apiKey?: string;
  sessionToken?: string;
}

function cookieValue(header: string | undefined, name: string): string | undefined {
  if (!header) return undefined;
  for (const part of header.split(';')) {
    const eq = part.indexOf('=');
    if (eq === -1 || part.slice(0, eq).trim() !== name) continue;
    const raw = part.slice(eq + 1).trim();
    try {
      return decodeURIComponent(raw);
    } catch {
      return raw; // malformed escapes: let it fail as an unknown session
    }
  }
  return undefined;
}

/** `X-API-Key`, then `Authorization: Bearer`, then the session cookie; browsers' WebSockets may use the query. */
export function presentedCredentials(headers: IncomingHttpHeaders, query?: URLSearchParams): PresentedCredentials {
  const apiKey = headers['x-api-key'];
  if (typeof apiKey === 'string' && apiKey !== '') return { apiKey };
  const authorization = headers.authorization;
  if (authorization?.startsWith('Bearer ')) return { sessionToken: authorization.slice(7).trim() };
  if (query?.get('apiKey')) return { apiKey: query.get('apiKey')! };
  if (query?.get('token')) return { sessionToken: query.get('token')! };
  const cookie = cookieValue(headers.cookie, SESSION_COOKIE);
  return cookie ? { sessionToken: cookie } : {};
}

/** Turns presented credentials into a principal, and keeps the credential caches honest. */
export class Authenticator {
  readonly #apiKeys: ApiKeyService;
  readonly #sessions: SessionService;

  constructor({ apiKeyService, sessionService, bus }: { apiKeyService: ApiKeyService; sessionService: SessionService; bus: EventBus }) {
    this.#apiKeys = apiKeyService;
    this.#sessions = sessionService;
    bus.subscribe(CREDENTIALS_CHANGED, (event) => {
      const match = concerns(event.payload as CredentialsChanged);
      apiKeyService.cache.deleteWhere(match);
      sessionService.cache.deleteWhere(match);
    });
    bus.subscribe(BUS_RESYNC, () => {
      apiKeyService.cache.clear();
      sessionService.cache.clear();
    });
  }

  /** Changes whenever a cached credential is dropped; a check that spans a change must be repeated. */
  get generation(): number {
    return this.#apiKeys.cache.generation + this.#sessions.cache.generation;
  }

  /**
   * The answer the caches can give without waiting: a principal, null when
   * nothing was presented, undefined when authenticate() must ask the database.
   * Throws UNAUTHENTICATED when what was presented is not valid.
   */
  cached(presented: PresentedCredentials): Principal | null | undefined {
    if (presented.apiKey !== undefined) return this.#apiKeys.cached(presented.apiKey);
    if (presented.sessionToken !== undefined) return this.#sessions.cached(presented.sessionToken);
    return null;
  }

  /**
   * null when nothing was presented; throws UNAUTHENTICATED when what was
   * presented is not valid. A re-check (`touch: false`) does not slide a session's expiry.
   */
  async authenticate(presented: PresentedCredentials, options?: { touch?: boolean }): Promise<Principal | null> {
    if (presented.apiKey !== undefined) return this.#apiKeys.authenticate(presented.apiKey);
    if (presented.sessionToken !== undefined) return this.#sessions.authenticate(presented.sessionToken, options);
    return null;
  }
}
