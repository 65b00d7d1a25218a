import { randomUUID } from 'node:crypto';
import type { Principal } from './context.ts';
import type { Dispatcher } from './dispatch.ts';
import { Envelope, type CookieOptions, type Transport } from './operation.ts';

/** Calls operations in the process, as a given caller: no HTTP, the same access checks, validation and error mapping. */
export interface Caller {
  /** The operation's data (or the envelope's fields); rejects with the RpcError the endpoint would answer. */
  call<T = any>(method: string, params?: unknown): Promise<T>;
  /** Cookies the operations set, as `name=value`. */
  readonly cookies: Map<string, string>;
}

export interface CallerOptions {
  clientIp?: string;
  baseUrl?: string;
}

/**
 * tRPC's createCaller idea: unit-level tests (and jobs) call an operation with
 * a principal instead of a credential. Everything after authentication is the
 * same path as `POST /api/rpc`.
 */
export function createCaller(dispatcher: Dispatcher, principal: Principal | null, options: CallerOptions = {}): Caller {
  const cookies = new Map<string, string>();
  const transport: Transport = {
    clientIp: options.clientIp ?? '127.0.0.1',
    baseUrl: options.baseUrl ?? 'http://localhost',
    setCookie(name: string, value: string, cookie?: CookieOptions) {
      if (cookie?.maxAge === 0) cookies.delete(name);
      else cookies.set(name, value);
    },
  };
  return {
    cookies,
    async call(method, params = {}) {
      const outcome = await dispatcher.dispatch({ method, params, requestId: randomUUID(), principal, transport });
      if (!outcome.ok) throw outcome.error;
      return (outcome.result instanceof Envelope ? outcome.result.fields : outcome.result) as never;
    },
  };
}
