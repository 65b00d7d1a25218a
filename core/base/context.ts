import type { EntityManager } from '@mikro-orm/postgresql';
import type { Role } from '../../config/roles.ts';
import type { Logger } from './logger.ts';

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
  /** What the credential narrows the role to (an API key's scopes and rate limit); nothing when absent. */
  limits?: CallerLimits;
  /** For an OAuth access token: the grant it belongs to and the door (resource) it was issued for. */
  grant?: { id: string; door: Door };
  /** For a session: when its person last proved who they are with every factor they have (sign-in or step-up), in ms since the epoch. */
  signedInAt?: number;
  /** For stored work: someone shaped it from a session that had not proved itself recently, so it may not do what needs a step-up. */
  unconfirmed?: true;
}

/** How recent a sign-in operations that need a step-up accept, unless STEP_UP_MAX_AGE_SECONDS says otherwise. */
export const STEP_UP_MAX_AGE_MS = 600_000;

/**
 * Whether the caller may do what needs a recent sign-in (OperationDefinition.stepUp,
 * docs/decisions/0065-second-factors.md): a session proved within the max age;
 * an API key, made only under a step-up; stored work none of whose authors
 * shaped it from a session that had not. Never an app's token: no person is there.
 */
export function provedRecently(principal: Principal | null, maxAgeMs: number, now = Date.now()): boolean {
  if (!principal || principal.grant) return false;
  if (principal.sessionId) return principal.signedInAt !== undefined && now - principal.signedInAt <= maxAgeMs;
  if (principal.apiKeyId) return true;
  return principal.unconfirmed !== true;
}

/** The resources an OAuth access token may be issued for: the MCP door (`/mcp`), or the API (`/api/rpc`, its WebSocket and routes). */
export type Door = 'mcp' | 'api';

/** What an API key (or an OAuth grant) may call, within what its user's role allows (plugins/api-key/README.md, "Scopes and limits"). */
export interface CallerLimits {
  /** Groups (`TaskRpc`) and operations (`TaskRpc.getData`) it may call; all of them when null. */
  scopes: readonly string[] | null;
  /** Only operations of kind `read` (and GET routes). */
  readOnly: boolean;
  /** Calls per minute, counted over every door and every node; none when null. */
  perMinute: number | null;
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
  /** What the caller's credential narrows its role to (an API key's scopes and read-only flag); null when nothing. */
  readonly limits: CallerLimits | null;
  /** The OAuth grant of an app's access token the call came with; null for any other credential. */
  readonly grantId: string | null;
  /** Whether the caller may do what needs a recent sign-in (provedRecently): what it stores to run later keeps this. */
  readonly steppedUp: boolean;
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
  /** STEP_UP_MAX_AGE_SECONDS in ms (STEP_UP_MAX_AGE_MS when not given). */
  stepUpMaxAgeMs?: number;
}

const stringOrNull = (value: unknown): string | null => (typeof value === 'string' && value !== '' ? value : null);

/**
 * The context of one call. The EntityManager and the child logger are made
 * on first use, because most hot-path operations never touch either.
 */
class CallContext implements RequestContext {
  readonly subscriptionId: string | null;
  readonly userId: string | null;
  readonly role: Role | null;
  readonly apiKeyId: string | null;
  readonly sessionId: string | null;
  readonly projectId: string | null;
  readonly serviceCode: string | null;
  readonly extra: Readonly<Record<string, unknown>>;
  readonly limits: CallerLimits | null;
  readonly grantId: string | null;
  readonly steppedUp: boolean;
  #em?: EntityManager;
  #log?: Logger;

  constructor(
    private readonly deps: ContextFactoryDeps,
    readonly requestId: string,
    principal: Principal | null,
  ) {
    this.subscriptionId = principal?.subscriptionId ?? null;
    this.userId = principal?.userId ?? null;
    this.role = principal?.role ?? null;
    this.apiKeyId = principal?.apiKeyId ?? null;
    this.sessionId = principal?.sessionId ?? null;
    this.extra = principal?.initialContext ?? {};
    this.limits = principal?.limits ?? null;
    this.grantId = principal?.grant?.id ?? null;
    this.steppedUp = provedRecently(principal, deps.stepUpMaxAgeMs ?? STEP_UP_MAX_AGE_MS);
    this.projectId = stringOrNull(this.extra.projectId);
    this.serviceCode = stringOrNull(this.extra.serviceCode);
  }

  get em(): EntityManager {
    return (this.#em ??= this.deps.forkEm(this.subscriptionId));
  }

  get log(): Logger {
    return (this.#log ??= this.deps.logger.child({ requestId: this.requestId }));
  }
}

export const createContext = (deps: ContextFactoryDeps, requestId: string, principal: Principal | null): RequestContext =>
  new CallContext(deps, requestId, principal);
