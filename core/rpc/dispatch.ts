import { randomUUID } from 'node:crypto';
import { UniqueConstraintViolationException } from '@mikro-orm/core';
import * as v from 'valibot';
import type { Authenticator, PresentedCredentials } from '../credentials/authenticator.ts';
import type { Database } from '../db/orm.ts';
import type { Logger } from '../logger.ts';
import { createContext, type Principal } from './context.ts';
import { RpcError, validationError, type ErrorBody, type ValidationIssue } from './errors.ts';
import { unsafeInputIssues } from './input-guard.ts';
import { refusedRegexError } from './list-query.ts';
import type { Access, Transport } from './operation.ts';
import type { RegisteredOperation, Registry } from './registry.ts';

const ROLE_ALLOWED: Record<Exclude<Access, 'public'>, (role: string) => boolean> = {
  user: () => true,
  staff: (role) => role === 'admin' || role === 'staff',
  admin: (role) => role === 'admin',
};

const REPORT_ALL_ISSUES = { abortEarly: false } as const;

export interface DispatchRequest {
  method: string;
  params: unknown;
  requestId: string;
  /** What the caller presented; ignored when `principal` is given. */
  credentials?: PresentedCredentials;
  /** An already known caller (the in-process caller); null calls anonymously. */
  principal?: Principal | null;
  transport: Transport;
}

export type DispatchResult =
  | { ok: true; result: unknown; method: string; userId: string | null }
  | { ok: false; error: RpcError; errorId?: string; method: string; userId: string | null };

export function issuesOf(issues: readonly v.BaseIssue<unknown>[]): ValidationIssue[] {
  return issues.map((issue) => ({
    path: issue.path?.map((item) => String(item.key)).join('.') ?? '',
    message: issue.message,
  }));
}

export function errorBody(error: RpcError, errorId?: string): ErrorBody {
  return {
    error: error.message,
    code: error.code,
    ...(error.issues ? { issues: error.issues } : {}),
    ...(errorId ? { errorId } : {}),
  };
}

/**
 * The one path every call takes, whatever carried it: look the method up in
 * the frozen registry, authenticate, check access, validate params (first
 * what no operation accepts, then the operation's schema), run the handler,
 * and map what it threw.
 */
export class Dispatcher {
  readonly #registry: Registry;
  readonly #authenticator: Authenticator;
  readonly #contextDeps: { forkEm: Database['forkEm']; logger: Logger };
  readonly #logger: Logger;

  constructor(registry: Registry, authenticator: Authenticator, { db, logger }: { db: Database; logger: Logger }) {
    this.#registry = registry;
    this.#authenticator = authenticator;
    this.#logger = logger;
    this.#contextDeps = { forkEm: (id) => db.forkEm(id), logger };
  }

  /**
   * Answers synchronously when nothing needs waiting for (a cached credential
   * and a synchronous handler): the hot path then creates no promise at all.
   */
  dispatch(request: DispatchRequest): DispatchResult | Promise<DispatchResult> {
    const operation = this.#registry.get(request.method);
    if (!operation) {
      return { ok: false, error: new RpcError('METHOD_NOT_FOUND', `Unknown method ${request.method}`), method: 'unknown', userId: null };
    }
    if (request.principal !== undefined) return this.#run(operation, request, request.principal);
    let found: Principal | null | Promise<Principal | null>;
    try {
      found = this.#principalFor(request.credentials ?? {}, operation.access === 'public');
    } catch (thrown) {
      return this.#failure(thrown, operation, request, null);
    }
    return found instanceof Promise
      ? found.then(
          (principal) => this.#run(operation, request, principal),
          (thrown) => this.#failure(thrown, operation, request, null),
        )
      : this.#run(operation, request, found);
  }

  #run(
    operation: RegisteredOperation,
    request: DispatchRequest,
    principal: Principal | null,
  ): DispatchResult | Promise<DispatchResult> {
    try {
      if (operation.access !== 'public') {
        if (!principal) throw new RpcError('UNAUTHENTICATED', 'Authentication required: send X-API-Key or a session token');
        if (!ROLE_ALLOWED[operation.access](principal.role)) {
          throw new RpcError('FORBIDDEN', `${operation.method} requires the ${operation.access} role`);
        }
      }
      const unsafe = unsafeInputIssues(request.params);
      if (unsafe.length > 0) throw validationError(unsafe);
      const parsed = v.safeParse(operation.params, request.params ?? {}, REPORT_ALL_ISSUES);
      if (!parsed.success) throw validationError(issuesOf(parsed.issues));
      const ctx = createContext(this.#contextDeps, request.requestId, principal);
      const result = operation.handler({ params: parsed.output, ctx: ctx as never, deps: operation.deps, transport: request.transport });
      const userId = principal?.userId ?? null;
      return result instanceof Promise
        ? result.then(
            (value): DispatchResult => ({ ok: true, result: value, method: operation.method, userId }),
            (thrown) => this.#failure(thrown, operation, request, principal),
          )
        : { ok: true, result, method: operation.method, userId };
    } catch (thrown) {
      return this.#failure(thrown, operation, request, principal);
    }
  }

  #failure(thrown: unknown, operation: RegisteredOperation, request: DispatchRequest, principal: Principal | null): DispatchResult {
    const { error, errorId } = this.#map(thrown, operation.method, request.requestId);
    return { ok: false, error, errorId, method: operation.method, userId: principal?.userId ?? null };
  }

  /**
   * Cached credentials answer synchronously, so the hot path awaits nothing
   * here. Public operations run anonymously when the credential is not valid.
   */
  #principalFor(presented: PresentedCredentials, lenient: boolean): Principal | null | Promise<Principal | null> {
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

  #map(thrown: unknown, method: string, requestId: string): { error: RpcError; errorId?: string } {
    if (thrown instanceof RpcError) return { error: thrown };
    if (thrown instanceof UniqueConstraintViolationException) {
      return { error: new RpcError('CONFLICT', 'A record with the same unique values already exists') };
    }
    const refused = refusedRegexError(thrown);
    if (refused) return { error: refused };
    const errorId = randomUUID();
    this.#logger.error({ err: thrown, errorId, requestId, method }, 'operation failed');
    return { error: new RpcError('INTERNAL', `Internal error (error id ${errorId})`), errorId };
  }
}
