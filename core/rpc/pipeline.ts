import { randomUUID } from 'node:crypto';
import { UniqueConstraintViolationException } from '@mikro-orm/core';
import type { Authenticator, PresentedCredentials } from '../credentials/authenticator.ts';
import type { Database } from '../db/orm.ts';
import type { Logger } from '../logger.ts';
import { createContext, type Principal, type RequestContext } from './context.ts';
import { RpcError } from './errors.ts';
import { refusedRegexError } from './list-query.ts';
import type { Access, OperationKind } from './operation.ts';
import type { RateLimiter } from '../rate-limiter.ts';

/** What the caller's limits are checked against: an operation's group, method, access and kind. */
export interface OperationSite {
  method: string;
  group: string;
  access: Access;
  kind?: OperationKind;
}

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
  readonly #contextDeps: { forkEm: Database['forkEm']; logger: Logger };
  readonly #logger: Logger;

  readonly #rateLimiter: RateLimiter;

  constructor(authenticator: Authenticator, { db, logger, rateLimiter }: { db: Database; logger: Logger; rateLimiter: RateLimiter }) {
    this.#authenticator = authenticator;
    this.#logger = logger;
    this.#rateLimiter = rateLimiter;
    this.#contextDeps = { forkEm: (id) => db.forkEm(id), logger };
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

  /** The caller a request's credentials name, for a listing of what they may call; null without (or with an invalid) credential. */
  async callerOf(presented: PresentedCredentials): Promise<Principal | null> {
    return presented.apiKey || presented.sessionToken ? await this.principalFor(presented, 'public') : null;
  }

  /** Throws unless the principal may use something of this access level; `what` names it in the message. */
  admit(access: Access, principal: Principal | null, what: string): void {
    if (access === 'public') return;
    if (!principal) throw new RpcError('UNAUTHENTICATED', 'Authentication required: send X-API-Key or a session token');
    if (!ROLE_ALLOWED[access](principal.role)) throw new RpcError('FORBIDDEN', `${what} requires the ${access} role`);
  }

  /**
   * Throws unless the caller may call the operation: its role (as `admit`),
   * then what its credential narrows that to (an API key's scopes and
   * read-only flag).
   */
  admitOperation(operation: OperationSite, principal: Principal | null): void {
    this.admit(operation.access, principal, operation.method);
    const limits = principal?.limits;
    if (!limits) return;
    if (limits.readOnly && operation.kind !== 'read') {
      throw new RpcError('FORBIDDEN', `This API key is read-only, and ${operation.method} changes data`);
    }
    if (limits.scopes && !limits.scopes.includes(operation.group) && !limits.scopes.includes(operation.method)) {
      throw new RpcError('FORBIDDEN', `This API key may not call ${operation.method}: its scopes are ${limits.scopes.join(', ')}`);
    }
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
   * Counts one request of a credential that has a rate limit, refusing it
   * with RATE_LIMITED past the limit; undefined (nothing to wait for) for any
   * other, so the hot path stays synchronous.
   */
  meter(principal: Principal | null): Promise<void> | undefined {
    const perMinute = principal?.limits?.perMinute;
    if (!perMinute || !principal?.apiKeyId) return undefined;
    return this.#rateLimiter.take(`api-key:${principal.apiKeyId}`, perMinute, 60);
  }

  /** For routes: a credential's rate limit, and a read-only key kept to GET and HEAD. */
  admitRoute(method: string, what: string, principal: Principal | null): Promise<void> | undefined {
    if (principal?.limits?.readOnly && method !== 'GET' && method !== 'HEAD')
      throw new RpcError('FORBIDDEN', `This API key is read-only: ${what} changes data`);
    return this.meter(principal);
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
