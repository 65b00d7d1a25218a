import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { Server as NetServer, Socket } from 'node:net';
import type Router from '@koa/router';
import Koa from 'koa';
import { ConfigError, type Config } from '../base/config.ts';
import type { Logger } from '../base/logger.ts';
import { CORE_VERSION } from '../base/version.ts';
import type { Authenticator } from '../credentials/authenticator.ts';
import type { Database } from '../db/orm.ts';
import type { EventBus } from '../events/bus.ts';
import type { EventDeclaration } from '../events/catalogue.ts';
import type { RateLimiter } from '../rate-limits/rate-limiter.ts';
import type { Dispatcher } from '../rpc/dispatch.ts';
import type { OpenRpcDocument } from '../rpc/openrpc.ts';
import type { RequestPipeline } from '../rpc/pipeline.ts';
import type { Registry } from '../rpc/registry.ts';
import type { UploadService } from '../uploads/upload-service.ts';
import { createMcpEndpoint } from './mcp.ts';
import type { ResourceCatalogue } from '../rpc/resources.ts';
import type { Metrics } from '../base/metrics.ts';
import { requestIdOf, untrustedProxyCheck } from './request-info.ts';
import { mountRoutes } from './routes.ts';
import { createRpcEndpoint } from './rpc-endpoint.ts';
import { WebSocketHub } from './websocket.ts';

/**
 * Every door of the service, mounted on one HTTP server; each passes its caller through the request pipeline
 * (core/rpc/pipeline.ts), so a key's limits hold alike everywhere:
 *
 * | door | path | file |
 * | --- | --- | --- |
 * | RPC in the spec's envelope and as JSON-RPC 2.0 | `POST /api/rpc` | rpc-endpoint.ts, json-rpc.ts |
 * | MCP (streamable HTTP) | `/mcp` | mcp.ts |
 * | events | `GET /ws` (WebSocket upgrade) | websocket.ts |
 * | listing, OpenRPC, health, readiness, metrics | `GET /api/rpc`, `/openrpc.json`, `/health`, `/ready`, `/metrics` | routes.ts |
 * | uploads and downloads | `/api/uploads/:uploadKey`, `/api/files/:fileId` | upload-routes.ts |
 * | plugins' own routes (console, OAuth callbacks, webhooks) | declared by each plugin | route.ts |
 *
 * `POST /api/rpc` and `/mcp` are answered before Koa, on the hot path; the rest through Koa's router.
 */
export function createHttpServer(parts: {
  config: Config;
  registry: Registry;
  events: readonly EventDeclaration[];
  openRpc: OpenRpcDocument;
  db: Database;
  metrics: Metrics;
  dispatcher: Dispatcher;
  pipeline: RequestPipeline;
  authenticator: Authenticator;
  resources: ResourceCatalogue;
  bus: EventBus;
  rateLimiter: RateLimiter;
  uploadService: UploadService;
  logger: Logger;
  pluginRoutes: Router[];
}): { server: Server; hub: WebSocketHub } {
  const { config, logger } = parts;
  const koa = new Koa({ proxy: config.trustProxy });
  koa.silent = true;
  koa.on('error', (err) => logger.error({ err }, 'http request failed'));
  mountRoutes(koa, parts);
  const koaHandler = koa.callback();
  const rpcEndpoint = {
    dispatcher: parts.dispatcher,
    pipeline: parts.pipeline,
    registry: parts.registry,
    openRpc: parts.openRpc,
    metrics: parts.metrics,
    logger,
    rateLimiter: parts.rateLimiter,
    options: { bodyLimitBytes: config.bodyLimitBytes, trustProxy: config.trustProxy, publicUrl: config.publicUrl },
  };
  const handleRpc = createRpcEndpoint(rpcEndpoint);
  const handleMcp = createMcpEndpoint({ ...rpcEndpoint, version: CORE_VERSION, resources: parts.resources });
  const checkProxy = untrustedProxyCheck(config.trustProxy, logger);

  // Idle connections are kept longer than clients and proxies keep theirs (undici 4 s, load balancers 60 s): a
  // server that closes first races a client sending its next request on that connection, which then fails with ECONNRESET.
  const server = createServer({ keepAliveTimeout: 65_000, headersTimeout: 66_000 }, (req: IncomingMessage, res: ServerResponse) => {
    const requestId = requestIdOf(req);
    checkProxy(req);
    if (req.method === 'POST' && (req.url === '/api/rpc' || req.url?.startsWith('/api/rpc?'))) {
      return handleRpc(req, res, requestId);
    }
    if (req.url === '/mcp' || req.url?.startsWith('/mcp?')) return handleMcp(req, res, requestId);
    res.setHeader('x-request-id', requestId);
    void koaHandler(req, res);
  });
  // Node times a request's head from its first byte: a connection that never sends one would hold its descriptor for good.
  server.on('connection', (socket: Socket) => {
    const timer = setTimeout(() => socket.bytesRead === 0 && socket.destroy(), server.headersTimeout).unref();
    socket.once('close', () => clearTimeout(timer));
  });
  const hub = new WebSocketHub({
    authenticator: parts.authenticator,
    bus: parts.bus,
    logger,
    metrics: parts.metrics,
    heartbeatMs: config.wsHeartbeatSeconds * 1000,
    limits: config.wsLimits,
    trustProxy: config.trustProxy,
    pipeline: parts.pipeline,
    publicUrl: config.publicUrl,
    allowedOrigins: config.wsAllowedOrigins,
  });
  hub.attach(server);
  return { server, hub };
}

/** Listens on host:port; an address or port it cannot use is a setting to change (a ConfigError), not a crash. */
export function listenOn(server: NetServer, port: number, host: string): Promise<void> {
  return new Promise<void>((resolve, reject) => {
    server.once('error', (error) => reject(listenError(error, port, host)));
    server.listen(port, host, () => resolve());
  });
}

function listenError(error: NodeJS.ErrnoException, port: number, host: string): Error {
  switch (error.code) {
    case 'EADDRINUSE':
      return new ConfigError(`PORT ${port} is already in use on ${host}; stop what listens there or set PORT to a free port`);
    case 'EACCES':
      return new ConfigError(`PORT ${port} needs privileges this process does not have; set PORT to 1024 or above`);
    case 'EADDRNOTAVAIL':
      return new ConfigError(`HOST ${host} is not an address of this machine; set HOST to one of its addresses, or 0.0.0.0 for all`);
    case 'ENOTFOUND':
    case 'EAI_AGAIN':
      return new ConfigError(`HOST ${host} is not an address and does not resolve to one; set HOST to an address of this machine, or 0.0.0.0 for all`);
    default:
      return error;
  }
}

export async function stopServer(server: Server, hub: WebSocketHub, timeoutMs: number): Promise<void> {
  const closed = new Promise<void>((resolve) => server.close(() => resolve()));
  server.closeIdleConnections();
  await hub.close();
  const timer = setTimeout(() => server.closeAllConnections(), timeoutMs);
  await closed;
  clearTimeout(timer);
}
