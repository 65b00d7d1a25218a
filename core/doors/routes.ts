import Router from '@koa/router';
import type Koa from 'koa';
import type { Principal } from '../base/context.ts';
import type { RequestPipeline } from '../rpc/pipeline.ts';
import type { Database } from '../db/orm.ts';
import type { EventDeclaration } from '../events/catalogue.ts';
import type { Logger } from '../base/logger.ts';
import { jsonSchemaOf, type Registry } from '../rpc/registry.ts';
import type { Config } from '../base/config.ts';
import { errorBody } from '../rpc/dispatch.ts';
import { unauthenticated } from '../base/errors.ts';
import { openRpcFor, type OpenRpcDocument } from '../rpc/openrpc.ts';
import { uploadRoutes, type UploadRouteDeps } from './upload-routes.ts';
import type { Metrics } from '../base/metrics.ts';
import { bearerMatches } from './metrics.ts';
import { meterAnonymousDiscovery } from './json-rpc.ts';
import { baseUrlOf, clientIpOf } from './request-info.ts';
import { declaredRoutes, pipelineRoute, type RouteDeclaration, type RouteHandler, type RouteOptions } from './route.ts';
import type { Access } from '../rpc/operation.ts';
import type { RateLimiter } from '../rate-limits/rate-limiter.ts';

interface CoreRouteDeps {
  registry: Registry;
  events: readonly EventDeclaration[];
  db: Database;
  metrics: Metrics;
  config: Pick<Config, 'metricsToken' | 'trustProxy' | 'publicUrl'>;
  openRpc: OpenRpcDocument;
  pipeline: RequestPipeline;
  logger: Logger;
  rateLimiter: RateLimiter;
}

/**
 * Mounts every HTTP route on Koa: the core's, uploads and downloads, then the
 * plugins'. Each declares what it serves and whether it reads or writes
 * (core/doors/route.ts); one that does not stops the start.
 */
export function mountRoutes(koa: Koa, parts: CoreRouteDeps & UploadRouteDeps & { pluginRoutes: readonly Router[] }): void {
  let declarations: readonly RouteDeclaration[] = [];
  const routers = [coreRoutes({ ...parts, routes: () => declarations }), uploadRoutes(parts), ...parts.pluginRoutes];
  declarations = declaredRoutes(routers);
  for (const router of routers) koa.use(router.routes()).use(router.allowedMethods());
}

/**
 * The non-RPC routes of the core: the operation, event and route listing, the
 * OpenRPC document, health, readiness and metrics. Each serves the service
 * itself (no group) and reads; through the request pipeline, an API key's
 * limits hold here too (a read-only key reads, a rate-limited key is counted).
 * The listing and the OpenRPC document, large answers, are counted without a
 * credential too: per address, with `rpc.discover` (meterAnonymousDiscovery).
 */
export function coreRoutes({
  registry,
  events,
  db,
  metrics,
  config,
  openRpc,
  pipeline,
  logger,
  rateLimiter,
  routes,
}: CoreRouteDeps & { routes: () => readonly RouteDeclaration[] }): Router {
  const router = new Router();
  const route = <A extends Access>(options: RouteOptions<A>, handler: RouteHandler<A>) => pipelineRoute({ pipeline, logger }, options, handler);
  const own = { access: 'public', serves: null, kind: 'read' } as const;
  // Each event with its payload as JSON Schema, as the operations carry theirs.
  const eventListing = events.map(({ name, describe, payload }) => ({ name, describe, ...(payload ? { payload: jsonSchemaOf(payload) } : {}) }));
  let listing: string | undefined;

  const permitted = (principal: Principal) => (method: string) => pipeline.permits(registry.get(method)!, principal);
  // A caller with a credential was counted by its rate as the route admitted it (core/doors/route.ts).
  const meterDiscovery = async (ctx: Koa.Context, caller: Principal | null): Promise<void> => {
    if (!caller) await meterAnonymousDiscovery(rateLimiter, clientIpOf(ctx.req, config.trustProxy));
  };

  router.get(
    '/api/rpc',
    route(own, async ({ http: ctx, caller }) => {
      await meterDiscovery(ctx, caller);
      ctx.type = 'application/json';
      // Made on first use: the plugins' routes are mounted after these.
      if (!caller)
        return void (ctx.body = listing ??=
          JSON.stringify({ success: true, data: { operations: registry.listing(), events: eventListing, routes: routes() } }));
      // A caller sees what they may call, and what their credential narrows it to.
      const permits = permitted(caller);
      const operations = registry.listing().filter((operation) => permits(operation.method));
      ctx.body = { success: true, data: { operations, events: eventListing, routes: routes(), caller: { role: caller.role, limits: caller.limits ?? null } } };
    }),
  );

  router.get(
    '/openrpc.json',
    route(own, async ({ http: ctx, caller }) => {
      await meterDiscovery(ctx, caller);
      ctx.body = openRpcFor(openRpc, baseUrlOf(ctx.req, config), caller ? permitted(caller) : undefined);
    }),
  );

  router.get(
    '/health',
    route(own, ({ http: ctx }) => {
      ctx.body = { status: 'ok' };
    }),
  );

  router.get(
    '/ready',
    route(own, async ({ http: ctx }) => {
      try {
        await db.execute('select 1');
        const pending = await db.pendingMigrations();
        ctx.status = pending.length === 0 ? 200 : 503;
        ctx.body = pending.length === 0 ? { status: 'ready' } : { status: 'migrating', pendingMigrations: pending };
      } catch {
        ctx.status = 503;
        ctx.body = { status: 'unavailable', reason: 'database unreachable' };
      }
    }),
  );

  router.get(
    '/metrics',
    route(own, async ({ http: ctx }) => {
      // Per-method counts tell which features are used and how often: with METRICS_TOKEN, only the scraper that holds it reads them.
      if (config.metricsToken !== undefined && !bearerMatches(ctx.get('authorization'), config.metricsToken)) {
        ctx.status = 401;
        ctx.set('WWW-Authenticate', 'Bearer realm="metrics"');
        ctx.body = { success: false, data: errorBody(unauthenticated('/metrics requires Authorization: Bearer <METRICS_TOKEN>')) };
        return;
      }
      ctx.type = metrics.registry.contentType;
      ctx.body = await metrics.registry.metrics();
    }),
  );

  return router;
}
