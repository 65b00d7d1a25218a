import type Router from '@koa/router';
import type { Context, Middleware } from 'koa';
import { presentedCredentials } from '../credentials/authenticator.ts';
import type { Logger } from '../base/logger.ts';
import type { AuthenticatedContext, Principal, RequestContext } from '../base/context.ts';
import { errorBody } from '../rpc/dispatch.ts';
import type { RpcError } from '../base/errors.ts';
import type { Access, OperationKind } from '../rpc/operation.ts';
import { NO_GROUP, type OperationSite, type RequestPipeline } from '../rpc/pipeline.ts';
import { answerDuringBody } from './read-body.ts';

export interface RouteArgs<A extends Access> {
  /** The request context an operation would get: the caller, the tenant's EntityManager, the request id. */
  ctx: A extends 'public' ? RequestContext : AuthenticatedContext;
  /** The HTTP exchange itself (Koa's context): params, headers, the body stream, the answer. */
  http: Context;
  /** Who is calling, with what their credential narrows them to; null for no (or, on a public route, no valid) credential. */
  caller: Principal | null;
  /**
   * For a route that `serves` something found per request: admits the caller
   * to that group (the same step as for operations) once it is known, before
   * anything is read or written for them. A group of null belongs to no
   * plugin: only callers without scopes are admitted.
   */
  admit(group: string | null): Promise<void>;
}

/** Found by the handler for each request (an upload's or file's purpose, say); `describe` says by what. */
export interface PerRequest {
  perRequest: string;
}

/**
 * What a route serves, as an API key's scopes name things: a group
 * (`NoteRpc`); operations (a key with any of them in scope may use it); the
 * service's own (null: listings, health, pages, which no scope narrows; public
 * routes only, as a route for someone serves their data); or
 * something the handler finds per request and admits with `admit`.
 */
export type Serves = string | readonly string[] | null | PerRequest;

/** What every route declares, public ones included: nothing is assumed, so the door test walks each route by what it says. */
interface Declared {
  /**
   * Who may call it, as for operations: `public`, `user`, `staff` or `admin`.
   * A public route acts for no one.
   */
  access: Access;
  /** What it belongs to (see Serves). */
  serves: Serves;
  /** `read` changes nothing (a read-only key may use it), `write` changes or acts. */
  kind: OperationKind;
}

export type RouteOptions<A extends Access> = { access: A } & Omit<Declared, 'access'> & {
    /**
     * How a refusal or failure is shown; the RPC error envelope as JSON unless
     * given (a route a browser opens answers with a page).
     */
    answerError?: (http: Context, error: RpcError, errorId?: string) => void;
    /** The most a refused request may still be sending that is read and dropped before the connection closes (for uploads). */
    drainLimitBytes?: number;
  };

/** A route as it is mounted and what it declares: what `GET /api/rpc` lists and the door test walks. */
export interface RouteDeclaration extends Declared {
  method: string;
  path: string;
}

const DECLARED = Symbol('route declaration');
type DeclaredMiddleware = Middleware & { [DECLARED]?: Declared };

export type RouteHandler<A extends Access> = (args: RouteArgs<A>) => unknown;

/** The x-request-id the server gave this request (core/app/app.ts sets it on every answer). */
const requestIdOf = (http: Context): string => String(http.response.get('x-request-id'));

/**
 * A Koa handler that runs `handler` through the request pipeline, as
 * operations run: the caller from the same credentials, admitted by the same
 * step (role, an API key's scopes and read-only flag against what the route
 * declares, its rate), the same context, and anything thrown answered with the
 * code and status an RPC call would get.
 */
export function pipelineRoute<A extends Access>(
  { pipeline, logger }: { pipeline: RequestPipeline; logger: Logger },
  options: RouteOptions<A>,
  handler: RouteHandler<A>,
): Middleware {
  const { access, answerError = answerEnvelope, drainLimitBytes = 0 } = options;
  // Checked with the route's path when it is mounted (declaredRoutes): a route missing any of them stops the start.
  const declared: Declared = { access, serves: options.serves, kind: options.kind };
  const perRequest = declared.serves !== null && typeof declared.serves === 'object' && 'perRequest' in declared.serves;
  const middleware: DeclaredMiddleware = async (http) => {
    const requestId = requestIdOf(http);
    const route = http.routerPath ?? http.path;
    const what = `${http.method} ${route}`;
    const site = (group: string | null, operations?: readonly string[]): OperationSite => ({ method: what, group, access, kind: declared.kind, operations });
    try {
      const principal = await pipeline.principalFor(presentedCredentials(http.req.headers), access);
      const { serves } = declared;
      // Until the handler finds what it serves, the role, the read-only flag and the rate are all there is to check.
      const first = perRequest
        ? site(null)
        : typeof serves === 'string' || serves === null
          ? site(serves)
          : site(groupOf(serves as readonly string[]), serves as readonly string[]);
      pipeline.admitOperation(first, principal);
      await pipeline.meter(principal);
      let admitted = !perRequest;
      const admit = async (group: string | null): Promise<void> => {
        if (admitted) throw new Error(`${what} admitted its caller twice`);
        // An unknown owner is no group at all, which no scope names (unlike the service's own, `serves: null`).
        pipeline.admitOperation(site(group ?? NO_GROUP), principal);
        admitted = true;
      };
      await handler({ ctx: pipeline.context(requestId, principal) as RouteArgs<A>['ctx'], http, caller: principal, admit });
      // A route that finds what it serves must admit its caller to it: one that forgot is a bug, not a pass.
      if (!admitted) throw new Error(`${what} serves ${describeServes(declared.serves)} but did not admit its caller`);
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
  middleware[DECLARED] = declared;
  return middleware;
}

/** The group of the first operation a route serves (a scope naming any of them, or their groups, admits). */
const groupOf = (operations: readonly string[]): string => operations[0]!.slice(0, operations[0]!.indexOf('.'));

const describeServes = (serves: Serves): string =>
  serves === null ? 'the service' : typeof serves === 'string' ? serves : 'perRequest' in serves ? serves.perRequest : serves.join(', ');

/**
 * Every route of these routers with what it declares; throws for one made
 * without pipelineRoute (it would declare nothing, so no key's limits could
 * be held at it) and for one whose access, serves or kind is missing or
 * malformed (a plugin in JavaScript, or one cast past the types): nothing is
 * assumed for any route, public ones included. HEAD goes with GET.
 */
export function declaredRoutes(routers: readonly Router[]): RouteDeclaration[] {
  return routers.flatMap((router) =>
    router.stack.flatMap((layer) => {
      const declared = (layer.stack as DeclaredMiddleware[]).find((middleware) => middleware[DECLARED])?.[DECLARED];
      const methods = layer.methods.filter((method) => method !== 'HEAD');
      const route = `Route ${methods.join('|')} ${layer.path}`;
      if (!declared) throw new Error(`${route} declares nothing: make it with http.route (core/doors/route.ts)`);
      const wrong = declarationProblem(declared);
      if (wrong) throw new Error(`${route} ${wrong} (core/doors/route.ts)`);
      return methods.map((method) => ({ method, path: String(layer.path), ...declared }));
    }),
  );
}

/** What is missing or malformed in a route's declaration; undefined when it is whole. */
function declarationProblem({ access, serves, kind }: Declared): string | undefined {
  if (!['public', 'user', 'staff', 'admin'].includes(access)) return 'must declare its access: public, user, staff or admin';
  if (kind !== 'read' && kind !== 'write') return "must declare its kind: 'read' (it changes nothing) or 'write'";
  const valid =
    serves === null ||
    (typeof serves === 'string' && serves !== '') ||
    (Array.isArray(serves) && serves.length > 0 && serves.every((operation) => typeof operation === 'string' && operation.includes('.'))) ||
    (typeof serves === 'object' && serves !== null && typeof (serves as Partial<PerRequest>).perRequest === 'string');
  if (!valid) return "must declare what it serves: a group, operations (Group.operation), { perRequest } or null for the service's own";
  // `null` passes every key's scopes: only what serves no one's data may say it (the core's own listing, health and metrics are public).
  if (serves === null && access !== 'public')
    return "serves null (the service's own, which no scope narrows) but is not public: declare the group or operations it serves";
  return undefined;
}

function answerEnvelope(http: Context, error: RpcError, errorId?: string): void {
  http.status = error.status;
  if (error.retryAfter !== undefined) http.set('Retry-After', String(error.retryAfter));
  http.body = { success: false, data: errorBody(error, errorId) };
}
