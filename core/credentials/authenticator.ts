import type { IncomingHttpHeaders } from 'node:http';
import * as v from 'valibot';
import { defineExtensionPoint } from '../base/extension-points.ts';
import type { Door, Principal } from '../base/context.ts';
import { unauthenticated } from '../base/errors.ts';
import type { Credentials } from './credentials.ts';

export const SESSION_COOKIE = 'session';

export interface PresentedCredentials {
  apiKey?: string;
  sessionToken?: string;
  /** An OAuth access token, and the door it was presented at (a token is accepted only where it was issued for). */
  accessToken?: { token: string; door: Door };
}

export type CredentialScheme = 'apiKey' | 'session' | 'oauth';

/** OAuth access tokens start with this, so a bearer token is told from a session token without a lookup. */
export const ACCESS_TOKEN_PREFIX = 'oat_';

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
  describe: 'Verifiers of the credential schemes (API keys, sessions, OAuth access tokens) every request is authenticated with.',
  contribution: v.object({ scheme: v.picklist(['apiKey', 'session', 'oauth']), verifier: v.object({ cached: v.function(), authenticate: v.function() }) }),
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

/** A bearer token: an OAuth access token by its prefix, a session token otherwise. */
const bearer = (token: string, door: Door): PresentedCredentials =>
  token.startsWith(ACCESS_TOKEN_PREFIX) ? { accessToken: { token, door } } : { sessionToken: token };

/**
 * `X-API-Key`, then `Authorization: Bearer`, then the session cookie; browsers'
 * WebSockets may use the query. `door` is where they were presented: `/mcp`,
 * or the API (every other door).
 */
export function presentedCredentials(headers: IncomingHttpHeaders, query?: URLSearchParams, door: Door = 'api'): PresentedCredentials {
  const apiKey = headers['x-api-key'];
  if (typeof apiKey === 'string' && apiKey !== '') return { apiKey };
  const authorization = headers.authorization;
  // RFC 7235: the scheme's name is case-insensitive.
  if (authorization !== undefined && /^bearer /i.test(authorization)) return bearer(authorization.slice(7).trim(), door);
  if (query?.get('apiKey')) return { apiKey: query.get('apiKey')! };
  if (query?.get('token')) return bearer(query.get('token')!, door);
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
    if (presented.accessToken !== undefined) {
      const principal = this.#verifier('oauth').cached(presented.accessToken.token);
      return principal && atDoor(principal, presented.accessToken.door);
    }
    return null;
  }

  /** Whether a scheme is verified here (OAuth's metadata is named in a 401 only where tokens are taken). */
  accepts(scheme: CredentialScheme): boolean {
    return this.#verifiers[scheme] !== undefined;
  }

  /**
   * null when nothing was presented; throws UNAUTHENTICATED when what was
   * presented is not valid. A re-check (`touch: false`) does not slide a session's expiry.
   */
  async authenticate(presented: PresentedCredentials, options?: { touch?: boolean }): Promise<Principal | null> {
    if (presented.apiKey !== undefined) return this.#verifier('apiKey').authenticate(presented.apiKey, options);
    if (presented.sessionToken !== undefined) return this.#verifier('session').authenticate(presented.sessionToken, options);
    if (presented.accessToken !== undefined) {
      const principal = await this.#verifier('oauth').authenticate(presented.accessToken.token, options);
      return atDoor(principal, presented.accessToken.door);
    }
    return null;
  }

  #verifier(scheme: CredentialScheme): CredentialVerifier {
    const verifier = this.#verifiers[scheme];
    if (!verifier) throw unauthenticated(`${SCHEME_NAMES[scheme]} are not accepted by this service`);
    return verifier;
  }
}

const SCHEME_NAMES: Record<CredentialScheme, string> = { apiKey: 'API keys', session: 'Sessions', oauth: 'OAuth access tokens' };

/** RFC 8707: a token issued for one resource is refused at another. */
function atDoor(principal: Principal, door: Door): Principal {
  if (principal.grant && principal.grant.door !== door) {
    throw unauthenticated(
      `This access token was issued for ${principal.grant.door === 'mcp' ? 'the MCP door (/mcp)' : 'the API (/api/rpc)'}, not for this one`,
    );
  }
  return principal;
}
