import { randomUUID } from 'node:crypto';
import { createContext, type ContextFactoryDeps, type Principal, type RequestContext } from '../base/context.ts';
import type { PresentedCredentials } from '../credentials/authenticator.ts';
import type { Dispatcher } from './dispatch.ts';
import type { OperationListing } from './registry.ts';
import { Envelope, type CookieOptions, type Transport } from './operation.ts';

/** Calls operations in the process, as a given caller: no HTTP, the same access checks, validation and error mapping. */
export interface Caller {
  /** The operation's data (or the envelope's fields); rejects with the RpcError the endpoint would answer. */
  call<T = unknown>(method: string, params?: unknown): Promise<T>;
  /** Cookies the operations set, as `name=value`. */
  readonly cookies: Map<string, string>;
}

/**
 * Who calls: a principal (null: anonymous), or the credentials a request
 * would present (a session token, an API key), authenticated at each call as
 * the endpoint does, so a revoked session or a key's scopes and rate limit
 * count as they would over HTTP.
 */
export type CallerIdentity = Principal | null | { credentials: PresentedCredentials };

export interface CallerOptions {
  clientIp?: string;
  baseUrl?: string;
}

/**
 * tRPC's createCaller idea: unit-level tests (and jobs) call an operation with
 * a principal, or with credentials, instead of an HTTP request. Everything
 * after authentication is the same path as `POST /api/rpc`; with credentials,
 * authentication too.
 */
export function createCaller(dispatcher: Dispatcher, who: CallerIdentity, options: CallerOptions = {}): Caller {
  const identity = who !== null && 'credentials' in who ? { credentials: who.credentials } : { principal: who };
  const cookies = new Map<string, string>();
  const transport: Transport = {
    clientIp: options.clientIp ?? '127.0.0.1',
    baseUrl: options.baseUrl ?? 'http://localhost',
    userAgent: null,
    setCookie(name: string, value: string, cookie?: CookieOptions) {
      if (cookie?.maxAge === 0) cookies.delete(name);
      else cookies.set(name, value);
    },
  };
  return {
    cookies,
    async call<T>(method: string, params: unknown = {}): Promise<T> {
      const outcome = await dispatcher.dispatch({ method, params, requestId: randomUUID(), ...identity, transport });
      if (!outcome.ok) throw outcome.error;
      // The caller names the result's type: the operation's own answer, unchecked (as a client reading JSON would).
      return (outcome.result instanceof Envelope ? outcome.result.fields : outcome.result) as T;
    },
  };
}

/**
 * Operations called in the process as a given principal, for plugins that
 * act for a user later on (a workflow's rpc nodes, a scheduled rpc action):
 * the same access checks, validation and errors as the endpoint. Usable
 * once every plugin's operations are registered (from start hooks on).
 */
export class OperationCaller {
  #dispatcher?: Dispatcher;
  #options: CallerOptions = {};
  readonly #contexts: ContextFactoryDeps;

  constructor(contexts: ContextFactoryDeps) {
    this.#contexts = contexts;
  }

  bind(dispatcher: Dispatcher, options: CallerOptions): void {
    this.#dispatcher = dispatcher;
    this.#options = options;
  }

  /** The request context of a principal (its subscription's EntityManager, a logger with the request id), for services called for it. */
  contextOf(principal: Principal, requestId: string = randomUUID()): RequestContext {
    return createContext(this.#contexts, requestId, principal);
  }

  /** Every operation the service has, with its access level, kind and description. */
  listing(): readonly OperationListing[] {
    if (!this.#dispatcher) throw new Error('Operations are listed only once every plugin is loaded');
    return this.#dispatcher.listing();
  }

  as(principal: Principal): Caller {
    if (!this.#dispatcher) throw new Error('Operations are called in the process only once every plugin is loaded');
    return createCaller(this.#dispatcher, principal, this.#options);
  }
}
