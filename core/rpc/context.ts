import type { EntityManager } from '@mikro-orm/postgresql';
import type { Role } from '../../config/roles.ts';
import type { Logger } from '../logger.ts';

/** Who is calling: set by authentication, never by the caller's params. */
export interface Principal {
  subscriptionId: string;
  userId: string;
  role: Role;
  /** The API key the call authenticated with, when it used one. */
  apiKeyId: string | null;
  /** The session the call authenticated with, when it used one. */
  sessionId: string | null;
  /** Extra context from the API key's initialContext (projectId, serviceCode, ...). */
  initialContext: Record<string, unknown> | null;
}

/**
 * The request context every service method takes first. The same shape serves
 * RPC calls, WebSocket handlers and background jobs.
 */
export interface RequestContext {
  readonly requestId: string;
  readonly subscriptionId: string | null;
  readonly userId: string | null;
  readonly role: Role | null;
  readonly apiKeyId: string | null;
  readonly sessionId: string | null;
  readonly projectId: string | null;
  readonly serviceCode: string | null;
  /** Everything the API key's initialContext carried, for plugins that read other keys. */
  readonly extra: Readonly<Record<string, unknown>>;
  /** A forked EntityManager with the tenant filter set to subscriptionId (made on first use). */
  readonly em: EntityManager;
  readonly log: Logger;
}

/** A context whose caller is known: what `user`, `staff` and `admin` operations receive. */
export interface AuthenticatedContext extends RequestContext {
  readonly subscriptionId: string;
  readonly userId: string;
  readonly role: Role;
}

export interface ContextFactoryDeps {
  forkEm: (subscriptionId: string | null) => EntityManager;
  logger: Logger;
}

const stringOrNull = (value: unknown): string | null => (typeof value === 'string' && value !== '' ? value : null);

/**
 * Builds the context for one call. The EntityManager and the child logger are
 * made lazily because most hot-path operations never touch either.
 */
export function createContext(
  deps: ContextFactoryDeps,
  requestId: string,
  principal: Principal | null,
): RequestContext {
  const extra = principal?.initialContext ?? {};
  let em: EntityManager | undefined;
  let log: Logger | undefined;
  const subscriptionId = principal?.subscriptionId ?? null;
  return {
    requestId,
    subscriptionId,
    userId: principal?.userId ?? null,
    role: principal?.role ?? null,
    apiKeyId: principal?.apiKeyId ?? null,
    sessionId: principal?.sessionId ?? null,
    projectId: stringOrNull(extra.projectId),
    serviceCode: stringOrNull(extra.serviceCode),
    extra,
    get em() {
      em ??= deps.forkEm(subscriptionId);
      return em;
    },
    get log() {
      log ??= deps.logger.child({ requestId });
      return log;
    },
  };
}
