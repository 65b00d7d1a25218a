import assert from 'node:assert/strict';
import { RpcError, type Principal } from 'rpc-service/plugin';
import type { App } from '../../core/app/app.ts';
import type { CallerOptions } from '../../core/rpc/caller.ts';
import type { PresentedCredentials } from '../../core/credentials/authenticator.ts';
import { createClient, RpcError as ClientRpcError } from '../../clients/typescript/src/index.ts';
import { GROUPS, type ErrorCode, type Groups, type Operations } from '../../clients/typescript/src/operations.ts';
import type { CallOptions } from '../../clients/typescript/src/options.ts';

/** The operations' params and results as the typed client declares them, for tests (a plugin's too) to name. */
export type * from '../../clients/typescript/src/operations.ts';

/** A session (the `token` of a signup or a login), an API key, or an app's OAuth access token for the API, as a test holds it. */
export type Credential = { token: string } | { apiKey: string } | { accessToken: string };

/** Who calls: a credential, a principal, or nobody (null: anonymously). */
export type Who = Credential | Principal | null;

/** An operation of the typed client, without the client's call options (a retry or an abort means nothing in the process). */
type Typed<F> = F extends (params: infer P, options?: CallOptions) => infer R ? (undefined extends P ? (params?: P) => R : (params: P) => R) : never;

type Method = keyof Operations;

/**
 * Every operation the typed client knows (clients/typescript/src/operations.ts,
 * generated from the registry), by group: `caller.MemoryRpc.saveMemory(params)`
 * with its params and declared result.
 */
export type Caller = { readonly [G in keyof Groups]: { readonly [O in keyof Groups[G]]: Typed<Groups[G][O]> } } & {
  /** An operation by name: typed when the client knows it. */
  call<M extends Method>(method: M, params?: Operations[M]['params']): Promise<Operations[M]['result']>;
  /** An operation the client does not know (a test plugin's, such as NoteRpc), or params it would refuse on purpose: the answer as the test names it. */
  call<T = unknown>(method: string, params?: unknown): Promise<T>;
};

function typed(call: (method: string, params: unknown) => Promise<unknown>): Caller {
  const caller: Record<string, unknown> = { call };
  for (const [group, names] of Object.entries(GROUPS)) {
    caller[group] = Object.fromEntries(names.map((name) => [name, (params?: unknown) => call(`${group}.${name}`, params)]));
  }
  return caller as Caller;
}

const isCredential = (who: Who): who is Credential => who !== null && ('token' in who || 'apiKey' in who || 'accessToken' in who);

const presented = (who: Credential): PresentedCredentials =>
  'token' in who ? { sessionToken: who.token } : 'apiKey' in who ? { apiKey: who.apiKey } : { accessToken: { token: who.accessToken, door: 'api' } };

/**
 * Calls in the process (core/rpc/caller.ts): the endpoint's path without HTTP,
 * a credential authenticated at each call as the endpoint does. The answer is
 * what a client reads, the JSON of the result, as the generated types describe it.
 * `options.baseUrl` is the address the answers' links (upload URLs) name.
 */
export function callerIn(app: App, who: Who, options?: CallerOptions): Caller {
  const identity = isCredential(who) ? { credentials: presented(who) } : who;
  const caller = app.createCaller(identity, options);
  return typed(async (method, params) => {
    const answer = await caller.call(method, params);
    return answer === undefined ? null : JSON.parse(JSON.stringify(answer));
  });
}

/** Calls over HTTP with the typed client, for a service in another process: no retries, so a refusal is seen as it comes. */
export function callerAt(baseUrl: string, who: Credential | null): Caller {
  // An access token travels as a bearer token, as a session's does.
  const credential = who === null ? {} : 'apiKey' in who ? { apiKey: who.apiKey } : { token: 'token' in who ? who.token : who.accessToken };
  const client = createClient({ baseUrl, retries: 0, ...credential });
  return typed((method, params) => client.call(method, params as Record<string, unknown>));
}

/** What a refused call rejects with: the core's RpcError in the process, the client's over HTTP. */
export interface Refusal {
  code: string;
  message: string;
  /** The HTTP status the code stands for. */
  status?: number;
  issues?: { path: string; message: string }[];
  retryAfter?: number;
}

/**
 * Awaits a call the service must refuse with `code`, and answers the error
 * for further checks (its message, its issues). `what` names the call in a
 * failure (the params of a case in a table, say).
 */
export async function refused(call: Promise<unknown>, code: ErrorCode, what?: string): Promise<Refusal> {
  const about = what ? `${what}: ` : '';
  const error = await call.then(
    (answer: unknown) => assert.fail(`${about}expected ${code}, the call answered ${JSON.stringify(answer)?.slice(0, 300)}`),
    (thrown: unknown) => thrown,
  );
  assert.ok(error instanceof RpcError || error instanceof ClientRpcError, `${about}expected ${code}, the call threw ${String(error)}`);
  assert.equal(error.code, code, `${about}${error.message}`);
  return error;
}

/** A refusal as a client reads it (its code, message, issues), as one text: an Error's message is not enumerable, so JSON.stringify alone would leave it out. */
export const shown = (error: Refusal): string => JSON.stringify({ ...error, message: error.message });

/** Whether a call was refused by the service (in the process, or over HTTP with an answer), not lost on the way. */
export const isRefusal = (error: unknown): error is Refusal => error instanceof RpcError || (error instanceof ClientRpcError && error.code !== 'NETWORK_ERROR');
