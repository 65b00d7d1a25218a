import type { Context, Middleware } from 'koa';
import { presentedCredentials } from '../credentials/authenticator.ts';
import type { Logger } from '../logger.ts';
import type { AuthenticatedContext, RequestContext } from '../rpc/context.ts';
import { errorBody } from '../rpc/dispatch.ts';
import type { RpcError } from '../rpc/errors.ts';
import type { Access } from '../rpc/operation.ts';
import type { RequestPipeline } from '../rpc/pipeline.ts';
import { answerDuringBody } from './read-body.ts';

export interface RouteArgs<A extends Access> {
  /** The request context an operation would get: the caller, the tenant's EntityManager, the request id. */
  ctx: A extends 'public' ? RequestContext : AuthenticatedContext;
  /** The HTTP exchange itself (Koa's context): params, headers, the body stream, the answer. */
  http: Context;
}

export interface RouteOptions<A extends Access> {
  /** Who may call it, as for operations: `public`, `user`, `staff` or `admin`. */
  access: A;
  /**
   * How a refusal or failure is shown; the RPC error envelope as JSON unless
   * given (a route a browser opens answers with a page).
   */
  answerError?: (http: Context, error: RpcError, errorId?: string) => void;
  /** The most a refused request may still be sending that is read and dropped before the connection closes (for uploads). */
  drainLimitBytes?: number;
}

export type RouteHandler<A extends Access> = (args: RouteArgs<A>) => unknown;

/** The x-request-id the server gave this request (core/app.ts sets it on every answer). */
const requestIdOf = (http: Context): string => String(http.response.get('x-request-id'));

/**
 * A Koa handler that runs `handler` through the request pipeline, as
 * operations run: the caller from the same credentials, the same access
 * check, the same context, and anything thrown answered with the code and
 * status an RPC call would get.
 */
export function pipelineRoute<A extends Access>(
  { pipeline, logger }: { pipeline: RequestPipeline; logger: Logger },
  { access, answerError = answerEnvelope, drainLimitBytes = 0 }: RouteOptions<A>,
  handler: RouteHandler<A>,
): Middleware {
  return async (http) => {
    const requestId = requestIdOf(http);
    const route = http.routerPath ?? http.path;
    try {
      const principal = await pipeline.principalFor(presentedCredentials(http.req.headers), access);
      pipeline.admit(access, principal, `${http.method} ${route}`);
      await pipeline.admitRoute(http.method, `${http.method} ${route}`, principal);
      await handler({ ctx: pipeline.context(requestId, principal) as RouteArgs<A>['ctx'], http });
    } catch (thrown) {
      const { error, errorId } = pipeline.failure(thrown, { requestId, route });
      if (!errorId) logger.info({ requestId, code: error.code, route }, error.message);
      if (http.req.complete || drainLimitBytes === 0) return answerError(http, error, errorId);
      // The client may still be sending: answer now, and close once the rest of its body is dropped.
      http.respond = false;
      const body = JSON.stringify({ success: false, data: errorBody(error, errorId) });
      answerDuringBody(http.req, http.res, error.status, { 'content-type': 'application/json; charset=utf-8' }, body, drainLimitBytes);
    }
  };
}

function answerEnvelope(http: Context, error: RpcError, errorId?: string): void {
  http.status = error.status;
  if (error.retryAfter !== undefined) http.set('Retry-After', String(error.retryAfter));
  http.body = { success: false, data: errorBody(error, errorId) };
}
