import Router from '@koa/router';
import type { Context } from 'koa';
import { presentedCredentials } from '../credentials/authenticator.ts';
import type { Principal } from '../rpc/context.ts';
import type { RequestPipeline } from '../rpc/pipeline.ts';
import type { Database } from '../db/orm.ts';
import type { EventDeclaration } from '../events/catalogue.ts';
import { jsonSchemaOf, type Registry } from '../rpc/registry.ts';
import type { Config } from '../config.ts';
import { errorBody } from '../rpc/dispatch.ts';
import { unauthenticated } from '../rpc/errors.ts';
import { openRpcFor, type OpenRpcDocument } from '../rpc/openrpc.ts';
import { bearerMatches, type Metrics } from './metrics.ts';
import { baseUrlOf } from './request-info.ts';

/** The non-RPC routes of the core: the operation and event listing, the OpenRPC document, health, readiness and metrics. */
export function coreRoutes({
  registry,
  events,
  db,
  metrics,
  config,
  openRpc,
  pipeline,
}: {
  registry: Registry;
  events: readonly EventDeclaration[];
  db: Database;
  metrics: Metrics;
  config: Pick<Config, 'metricsToken' | 'trustProxy' | 'publicUrl'>;
  openRpc: OpenRpcDocument;
  pipeline: RequestPipeline;
}): Router {
  const router = new Router();
  // Each event with its payload as JSON Schema, as the operations carry theirs.
  const eventListing = events.map(({ name, describe, payload }) => ({ name, describe, ...(payload ? { payload: jsonSchemaOf(payload) } : {}) }));
  const listing = JSON.stringify({ success: true, data: { operations: registry.listing(), events: eventListing } });

  const callerOf = (ctx: Context) => pipeline.callerOf(presentedCredentials(ctx.req.headers));
  const permitted = (principal: Principal) => (method: string) => pipeline.permits(registry.get(method)!, principal);

  router.get('/api/rpc', async (ctx) => {
    ctx.type = 'application/json';
    const caller = await callerOf(ctx);
    if (!caller) return void (ctx.body = listing);
    // A caller sees what they may call, and what their credential narrows it to.
    const permits = permitted(caller);
    const operations = registry.listing().filter((operation) => permits(operation.method));
    ctx.body = { success: true, data: { operations, events: eventListing, caller: { role: caller.role, limits: caller.limits ?? null } } };
  });

  router.get('/openrpc.json', async (ctx) => {
    const caller = await callerOf(ctx);
    ctx.body = openRpcFor(openRpc, baseUrlOf(ctx.req, config), caller ? permitted(caller) : undefined);
  });

  router.get('/health', (ctx) => {
    ctx.body = { status: 'ok' };
  });

  router.get('/ready', async (ctx) => {
    try {
      await db.execute('select 1');
      const pending = await db.pendingMigrations();
      ctx.status = pending.length === 0 ? 200 : 503;
      ctx.body = pending.length === 0 ? { status: 'ready' } : { status: 'migrating', pendingMigrations: pending };
    } catch {
      ctx.status = 503;
      ctx.body = { status: 'unavailable', reason: 'database unreachable' };
    }
  });

  router.get('/metrics', async (ctx) => {
    // Per-method counts tell which features are used and how often: with METRICS_TOKEN, only the scraper that holds it reads them.
    if (config.metricsToken !== undefined && !bearerMatches(ctx.get('authorization'), config.metricsToken)) {
      ctx.status = 401;
      ctx.set('WWW-Authenticate', 'Bearer realm="metrics"');
      ctx.body = { success: false, data: errorBody(unauthenticated('/metrics requires Authorization: Bearer <METRICS_TOKEN>')) };
      return;
    }
    ctx.type = metrics.registry.contentType;
    ctx.body = await metrics.registry.metrics();
  });

  return router;
}
