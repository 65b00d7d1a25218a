import type { IncomingHttpHeaders } from 'node:http';
import * as v from 'valibot';
import { defineExtensionPoint } from '../base/extension-points.ts';
import type { Principal } from '../base/context.ts';
import { unauthenticated } from '../base/errors.ts';
import type { Credentials } from './credentials.ts';

export const SESSION_COOKIE = 'session';

export interface PresentedCredentials {
  apiKey?: string;
  sessionToken?: string;
}

export type CredentialScheme = 'apiKey' | 'session';

/**
 * What verifies one credential scheme. The core authenticates every request
 * through it; the plugin that owns the credentials provides it.
 */
export interface CredentialVerifier {
  /**
   * The principal a cache can give without waiting; undefined when
   * authenticate() must ask the database. Throws UNAUTHENTICATED when invalid.
   */
  cached(presented: string): Principal | undefined;
  /** Throws UNAUTHENTICATED for anything not currently valid. `touch: false` checks without counting as a use. */
  authenticate(presented: string, options?: { touch?: boolean }): Promise<Principal>;
}

/** A plugin's contribution to `core.credentials`: the scheme it verifies and its verifier. */
export interface CredentialSchemeContribution {
  scheme: CredentialScheme;
  verifier: CredentialVerifier;
}

declare module '../base/extension-points.ts' {
  interface ExtensionPoints {
    'core.credentials': CredentialSchemeContribution;
  }
}

export const credentialsPoint = defineExtensionPoint({
  id: 'core.credentials',
  describe: 'Verifiers of the credential schemes (API keys, sessions) every request is authenticated with.',
  contribution: v.object({ scheme: v.picklist(['apiKey', 'session']), verifier: v.object({ cached: v.function(), authenticate: v.function() }) }),
});

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

/** Turns presented credentials into a principal through the verifiers plugins provide. */
export class Authenticator {
  readonly #verifiers: Partial<Record<CredentialScheme, CredentialVerifier>>;
  readonly #credentials: Credentials;

  constructor(verifiers: Partial<Record<CredentialScheme, CredentialVerifier>>, credentials: Credentials) {
    this.#verifiers = verifiers;
    this.#credentials = credentials;
  }

  /** Changes whenever a cached credential is dropped; a check that spans a change must be repeated. */
  get generation(): number {
    return this.#credentials.generation;
  }

  /**
   * The answer the caches can give without waiting: a principal, null when
   * nothing was presented, undefined when authenticate() must ask the database.
   * Throws UNAUTHENTICATED when what was presented is not valid.
   */
  cached(presented: PresentedCredentials): Principal | null | undefined {
    if (presented.apiKey !== undefined) return this.#verifier('apiKey').cached(presented.apiKey);
    if (presented.sessionToken !== undefined) return this.#verifier('session').cached(presented.sessionToken);
    return null;
  }

  /**
   * null when nothing was presented; throws UNAUTHENTICATED when what was
   * presented is not valid. A re-check (`touch: false`) does not slide a session's expiry.
   */
  async authenticate(presented: PresentedCredentials, options?: { touch?: boolean }): Promise<Principal | null> {
    if (presented.apiKey !== undefined) return this.#verifier('apiKey').authenticate(presented.apiKey, options);
    if (presented.sessionToken !== undefined) return this.#verifier('session').authenticate(presented.sessionToken, options);
    return null;
  }

  #verifier(scheme: CredentialScheme): CredentialVerifier {
    const verifier = this.#verifiers[scheme];
    if (!verifier) throw unauthenticated(`${scheme === 'apiKey' ? 'API keys' : 'Sessions'} are not accepted by this service`);
    return verifier;
  }
}
