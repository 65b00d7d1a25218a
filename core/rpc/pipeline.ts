import { randomUUID } from 'node:crypto';
import { UniqueConstraintViolationException } from '@mikro-orm/core';
import type { Authenticator, CredentialScheme, PresentedCredentials } from '../credentials/authenticator.ts';
import type { Database } from '../db/orm.ts';
import type { Logger } from '../base/logger.ts';
import { createContext, provedRecently, type Principal, type RequestContext } from '../base/context.ts';
import { RpcError } from '../base/errors.ts';
import { refusedRegexError } from '../records/filter-language.ts';
import type { Access, OperationKind } from './operation.ts';
import type { RateLimiter } from '../rate-limits/rate-limiter.ts';
import type { BusEvent } from '../events/bus.ts';

/**
 * What a door serves, as the caller's role and an API key's limits are
 * checked against it: an operation (its group, method, access and kind), a
 * route (its path as `method`, the group or operations it declares), an event
 * (its name, its plugin's group).
 */
export interface OperationSite {
  /** `Group.operation`, or what names the route or event in a refusal. */
  method: string;
  /** The group it belongs to; null for the service's own (listings, health, pages), which no scope narrows. */
  group: string | null;
  access: Access;
  kind?: OperationKind;
  /**
   * Operations whose scope also admits: those a route serves, or `any` for
   * an event (a key with any operation of the group in scope hears it).
   */
  operations?: readonly string[] | 'any';
}

/** An event as the doors that deliver it (the WebSocket, webhooks) see it. */
export type HeardEvent = Pick<BusEvent, 'name' | 'userIds'>;

const ROLE_ALLOWED: Record<Exclude<Access, 'public'>, (role: string) => boolean> = {
  user: () => true,
  staff: (role) => role === 'admin' || role === 'staff',
  admin: (role) => role === 'admin',
};

/** Where a request went, for the log line of a failure: an operation (`Group.operation`) or an HTTP route (its path pattern). */
export type RequestSite = { requestId: string } & ({ method: string } | { route: string });

export interface Failure {
  error: RpcError;
  /** Set for INTERNAL errors: the id the caller can quote, logged with the cause. */
  errorId?: string;
}

/**
 * The steps every request takes, whatever carried it (the RPC endpoint, the
 * in-process caller, uploads, downloads, plugin routes): who is calling,
 * whether their role may, the context a handler runs in, and what the caller
 * is told when something is thrown. The same error gets the same code and
 * status on every door.
 */
export class RequestPipeline {
  readonly #authenticator: Authenticator;
  readonly #contextDeps: { forkEm: Database['forkEm']; logger: Logger; stepUpMaxAgeMs: number };
  readonly #logger: Logger;

  readonly #rateLimiter: RateLimiter;
  readonly #eventGroups: ReadonlyMap<string, string>;
  readonly #stepUpMaxAgeMs: number;

  constructor(
    authenticator: Authenticator,
    {
      db,
      logger,
      rateLimiter,
      eventGroups,
      stepUpMaxAgeSeconds = 600,
    }: {
      db: Database;
      logger: Logger;
      rateLimiter: RateLimiter;
      /** The group of the plugin that declared each event of the catalogue. */
      eventGroups: ReadonlyMap<string, string>;
      stepUpMaxAgeSeconds?: number;
    },
  ) {
    this.#stepUpMaxAgeMs = stepUpMaxAgeSeconds * 1000;
    this.#authenticator = authenticator;
    this.#eventGroups = eventGroups;
    this.#logger = logger;
    this.#rateLimiter = rateLimiter;
    this.#contextDeps = { forkEm: (id) => db.forkEm(id), logger, stepUpMaxAgeMs: this.#stepUpMaxAgeMs };
  }

  /**
   * The caller the credentials name; null for none. Cached credentials answer
   * synchronously, so the RPC hot path awaits nothing here. For public access
   * a credential that is not valid is treated as none.
   */
  principalFor(presented: PresentedCredentials, access: Access): Principal | null | Promise<Principal | null> {
    const lenient = access === 'public';
    try {
      const cached = this.#authenticator.cached(presented);
      if (cached !== undefined) return cached;
    } catch (error) {
      if (lenient) return null;
      throw error;
    }
    const pending = this.#authenticator.authenticate(presented);
    return lenient ? pending.catch(() => null) : pending;
  }

  /** Whether a credential scheme is verified by a loaded plugin. */
  accepts(scheme: CredentialScheme): boolean {
    return this.#authenticator.accepts(scheme);
  }

  /** The caller a request's credentials name, for a listing of what they may call; null without (or with an invalid) credential. */
  async callerOf(presented: PresentedCredentials): Promise<Principal | null> {
    return presented.apiKey || presented.sessionToken || presented.accessToken ? await this.principalFor(presented, 'public') : null;
  }

  /** Throws unless the principal may use something of this access level; `what` names it in the message. */
  admit(access: Access, principal: Principal | null, what: string): void {
    if (access === 'public') return;
    if (!principal) throw new RpcError('UNAUTHENTICATED', 'Authentication required: send X-API-Key or a session token');
    if (!ROLE_ALLOWED[access](principal.role)) throw new RpcError('FORBIDDEN', `${what} requires the ${access} role`);
  }

  /**
   * The one admission step of every door (operations, routes, uploads and
   * downloads, git, the WebSocket and webhooks): throws unless the caller's
   * role may use the site, then unless its credential's limits (an API key's
   * scopes and read-only flag) allow it.
   */
  admitOperation(site: OperationSite, principal: Principal | null): void {
    this.admit(site.access, principal, site.method);
    const limits = principal?.limits;
    if (!limits) return;
    const credential = principal!.grant ? 'This access token' : 'This API key';
    if (limits.readOnly && site.kind !== 'read') {
      throw new RpcError('FORBIDDEN', `${credential} is read-only, and ${site.method} changes data`);
    }
    if (limits.scopes && !inScope(limits.scopes, site)) {
      throw new RpcError('FORBIDDEN', `${credential} may not call ${site.method}: its scopes are ${limits.scopes.join(', ')}`);
    }
  }

  /**
   * Throws STEP_UP_REQUIRED unless the caller proved who they are recently
   * (provedRecently, docs/decisions/0065-second-factors.md).
   */
  requireRecentSignIn(principal: Principal | null, what: string): void {
    if (provedRecently(principal, this.#stepUpMaxAgeMs)) return;
    // A public operation called without a credential (and without what else it takes, a ticket): nobody to confirm.
    if (!principal) throw new RpcError('UNAUTHENTICATED', 'Authentication required: send X-API-Key or a session token');
    const minutes = Math.round(this.#stepUpMaxAgeMs / 60_000);
    const details = { maxAgeSeconds: this.#stepUpMaxAgeMs / 1000 };
    if (principal?.sessionId) {
      throw new RpcError('STEP_UP_REQUIRED', `${what} needs a sign-in within the last ${minutes} minutes: confirm who you are (AccountSecurityRpc.stepUp)`, {
        details,
      });
    }
    const why = principal?.grant
      ? "an app's token stands for nobody present: use a session or an API key"
      : 'someone saved what runs here from a session not confirmed within that time: confirm who you are and save it again';
    throw new RpcError('STEP_UP_REQUIRED', `${what} needs a person who confirmed who they are within ${minutes} minutes; ${why}`, { details });
  }

  /** Whether the caller may call the operation (what MCP lists and GET /api/rpc shows a caller). */
  permits(operation: OperationSite, principal: Principal | null): boolean {
    try {
      this.admitOperation(operation, principal);
      return true;
    } catch {
      return false;
    }
  }

  /**
   * Whether a caller receives an event, on the WebSocket and at a webhook
   * alike: one meant for some users reaches only them, and the event is a
   * read of its plugin's group, admitted as operations are (a key with any
   * operation of that group in scope hears it).
   */
  hears(principal: Principal, event: HeardEvent): boolean {
    if (event.userIds && !event.userIds.includes(principal.userId)) return false;
    const group = this.#eventGroups.get(event.name);
    // An event of no plugin's catalogue (one a tenant named, say) belongs to no group: only keys without scopes hear it.
    return this.permits({ method: event.name, group: group ?? NO_GROUP, access: 'user', kind: 'read', operations: 'any' }, principal);
  }

  /**
   * Counts one request of a credential that has a rate limit, refusing it
   * with RATE_LIMITED past the limit; undefined (nothing to wait for) for any
   * other, so the hot path stays synchronous.
   */
  meter(principal: Principal | null): Promise<void> | undefined {
    const perMinute = principal?.limits?.perMinute;
    if (!perMinute || !principal?.apiKeyId) return undefined;
    return this.#rateLimiter.take(`api-key:${principal.apiKeyId}`, perMinute, 60);
  }

  context(requestId: string, principal: Principal | null): RequestContext {
    return createContext(this.#contextDeps, requestId, principal);
  }

  /**
   * What the caller is told about a thrown value: an RpcError as it is, a
   * unique violation as CONFLICT, a regular expression PostgreSQL refused as
   * VALIDATION_ERROR, anything else as INTERNAL with an error id, logged with
   * its cause (never sent).
   */
  failure(thrown: unknown, site: RequestSite): Failure {
    if (thrown instanceof RpcError) return { error: thrown };
    if (thrown instanceof UniqueConstraintViolationException) {
      return { error: new RpcError('CONFLICT', 'A record with the same unique values already exists') };
    }
    const refused = refusedRegexError(thrown);
    if (refused) return { error: refused };
    const errorId = randomUUID();
    this.#logger.error({ err: thrown, errorId, ...site }, 'method' in site ? 'operation failed' : 'route failed');
    return { error: new RpcError('INTERNAL', `Internal error (error id ${errorId})`), errorId };
  }
}

/** No group's name (groups end in `Rpc`): what an event, upload or file of no loaded plugin belongs to, which no scope names. */
export const NO_GROUP = '(no group)';

/** Whether a key's scopes name the site: its group, itself, or one of the operations it serves. */
function inScope(scopes: readonly string[], site: OperationSite): boolean {
  if (site.group === null) return true;
  const { group, operations } = site;
  if (scopes.includes(group) || scopes.includes(site.method)) return true;
  if (operations === 'any') return scopes.some((scope) => scope.startsWith(`${group}.`));
  // A route serving operations admits a key with any of them, or any of their groups, in scope.
  return operations?.some((operation) => scopes.includes(operation) || scopes.includes(operation.slice(0, operation.indexOf('.')))) ?? false;
}
