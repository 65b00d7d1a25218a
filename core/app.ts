import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import Router from '@koa/router';
import Koa from 'koa';
import { asValue } from 'awilix';
import type { DestinationStream } from 'pino';
import { ApiKeyService } from './auth/api-keys.ts';
import { Authenticator } from './auth/credentials.ts';
import { SecretBox } from './auth/crypto.ts';
import { identityEntities } from './auth/entities.ts';
import { resolveMasterKey } from './auth/master-key.ts';
import { SessionService } from './auth/sessions.ts';
import type { Config } from './config.ts';
import { createAppContainer, type Container, type Cradle } from './container.ts';
import { coreMigrations } from './db/core-migrations.ts';
import { openDatabase, type Database } from './db/orm.ts';
import { EventBus } from './events/bus.ts';
import { WebSocketHub } from './events/websocket.ts';
import { Metrics } from './http/metrics.ts';
import { MessageSender } from './messaging/message-sender.ts';
import { LifecycleHooks } from './plugin/hooks.ts';
import { requestIdOf } from './http/request-info.ts';
import { coreRoutes } from './http/routes.ts';
import { createRpcEndpoint } from './http/rpc-endpoint.ts';
import { createLogger, type Logger } from './logger.ts';
import type { Plugin } from './plugin/define.ts';
import { discoverLocalPlugins, importPackagePlugins, PluginLoadError, validatePlugins } from './plugin/loader.ts';
import { WorkerPool } from './pool/worker-pool.ts';
import { RateLimiter } from './rate-limiter.ts';
import { Dispatcher } from './rpc/dispatch.ts';
import { buildRegistry, type Registry } from './rpc/registry.ts';
import { uploadEntities } from './uploads/entities.ts';
import { uploadRoutes } from './uploads/routes.ts';
import { DiskStorage, type FileStorage } from './uploads/storage.ts';
import { UploadService } from './uploads/upload-service.ts';

const PLUGINS_DIR = fileURLToPath(new URL('../plugins/', import.meta.url));

declare module './container.ts' {
  interface Cradle {
    secretBox: SecretBox;
    bus: EventBus;
    pool: WorkerPool;
    rateLimiter: RateLimiter;
    metrics: Metrics;
    sessionService: SessionService;
    apiKeyService: ApiKeyService;
    authenticator: Authenticator;
    dispatcher: Dispatcher;
    messageSender: MessageSender;
    lifecycle: LifecycleHooks;
    fileStorage: FileStorage;
    uploadService: UploadService;
  }
}

export interface AppOptions {
  config: Config;
  /** Where logs go (stdout by default). */
  logStream?: DestinationStream;
  /** Keep the embedded database in memory (tests). */
  inMemoryDatabase?: boolean;
  /** Plugins given as objects, loaded after those of plugins/ and PLUGINS. */
  extraPlugins?: Plugin[];
  /** Folder of built-in plugins; tests may point it elsewhere. */
  pluginsDir?: string;
}

export interface App {
  readonly config: Config;
  readonly container: Container;
  readonly deps: Cradle;
  readonly registry: Registry;
  readonly plugins: readonly Plugin[];
  readonly server: Server;
  readonly logger: Logger;
  listen(port?: number, host?: string): Promise<string>;
  close(): Promise<void>;
}

/** Builds the whole service: plugins, database, container, HTTP and WebSocket endpoints. Does not listen yet. */
export async function createApp(options: AppOptions): Promise<App> {
  const { config } = options;
  const logger = createLogger(config.logLevel, options.logStream);
  const secretBox = new SecretBox(resolveMasterKey(config, logger));

  const plugins = validatePlugins([
    ...(await discoverLocalPlugins(options.pluginsDir ?? PLUGINS_DIR)),
    ...(await importPackagePlugins(config.plugins)),
    ...(options.extraPlugins ?? []),
  ]);

  const db = await openDatabase({
    databaseUrl: config.databaseUrl,
    dataDir: config.dataDir,
    inMemory: options.inMemoryDatabase,
    entities: [...identityEntities, ...uploadEntities, ...plugins.flatMap((plugin) => plugin.entities ?? [])],
    migrations: [
      ...coreMigrations.map((migration) => ({ owner: 'core', migration })),
      ...plugins.flatMap((plugin) => (plugin.migrations ?? []).map((migration) => ({ owner: plugin.id, migration }))),
    ],
    logger,
  });
  const bus = new EventBus(logger);
  const pool = new WorkerPool({ size: config.workers, logger });
  const closeBase = async () => {
    await bus.close();
    await pool.close();
    await db.close();
  };

  try {
    await db.migrate();
    if (config.databaseUrl) await bus.startFanOut(config.databaseUrl, (sql, params) => db.execute(sql, params));

    const container = createAppContainer();
    const metrics = new Metrics();
    container.register({
      config: asValue(config),
      logger: asValue(logger),
      db: asValue(db),
      secretBox: asValue(secretBox),
      bus: asValue(bus),
      pool: asValue(pool),
      metrics: asValue(metrics),
      rateLimiter: asValue(new RateLimiter(db)),
      messageSender: asValue(new MessageSender({ config: config.messaging, db, logger })),
      lifecycle: asValue(new LifecycleHooks(plugins, () => container.cradle, logger)),
    });
    const deps = container.cradle;
    const sessionService = new SessionService(deps);
    const apiKeyService = new ApiKeyService(deps);
    container.register({
      sessionService: asValue(sessionService),
      apiKeyService: asValue(apiKeyService),
      fileStorage: asValue(new DiskStorage(path.join(config.dataDir, 'files'))),
    });
    const uploadService = new UploadService(deps);
    container.register({ uploadService: asValue(uploadService) });
    const authenticator = new Authenticator(deps);
    const registry = buildRegistry(plugins);
    const dispatcher = new Dispatcher(registry, authenticator, deps);
    container.register({ authenticator: asValue(authenticator), dispatcher: asValue(dispatcher) });
    // Every core service is registered by now, so a plugin cannot replace one.
    for (const plugin of plugins) {
      for (const name of Object.keys(plugin.services ?? {})) {
        if (container.hasRegistration(name)) {
          throw new PluginLoadError(`Plugin "${plugin.id}": service "${name}" is already registered by the core`);
        }
      }
      container.register(plugin.services ?? {});
    }

    for (const plugin of plugins) {
      for (const [name, subscriber] of Object.entries(plugin.subscribers ?? {})) {
        bus.subscribe(name, (event) => subscriber(event, deps));
      }
      await plugin.start?.(deps);
    }

    const pluginRoutes = plugins.flatMap((plugin) => {
      if (!plugin.routes) return [];
      const router = new Router();
      plugin.routes(router, deps);
      return [router];
    });
    const server = createHttpServer({ config, registry, db, metrics, dispatcher, authenticator, uploadService, logger, pluginRoutes });
    const hub = new WebSocketHub({ authenticator, bus, logger, metrics, heartbeatMs: config.wsHeartbeatSeconds * 1000 });
    hub.attach(server);
    uploadService.start();

    return {
      config,
      container,
      deps,
      registry,
      plugins,
      server,
      logger,
      async listen(port = config.port, host = config.host) {
        await new Promise<void>((resolve, reject) => {
          server.once('error', reject);
          server.listen(port, host, () => resolve());
        });
        const address = server.address() as AddressInfo;
        const url = `http://${address.family === 'IPv6' ? `[${address.address}]` : address.address}:${address.port}`;
        logger.info({ url, database: db.kind, plugins: plugins.map((plugin) => plugin.id) }, 'listening');
        return url;
      },
      async close() {
        await stopServer(server, hub, config.shutdownTimeoutMs);
        for (const plugin of [...plugins].reverse()) await plugin.stop?.(deps);
        await uploadService.stop();
        await closeBase();
        await container.dispose();
      },
    };
  } catch (error) {
    await closeBase().catch(() => undefined);
    throw error;
  }
}

function createHttpServer(parts: {
  config: Config;
  registry: Registry;
  db: Database;
  metrics: Metrics;
  dispatcher: Dispatcher;
  authenticator: Authenticator;
  uploadService: UploadService;
  logger: Logger;
  pluginRoutes: Router[];
}): Server {
  const { config, logger } = parts;
  const koa = new Koa({ proxy: config.trustProxy });
  koa.silent = true;
  koa.on('error', (err) => logger.error({ err }, 'http request failed'));
  const routes = coreRoutes(parts);
  koa.use(routes.routes()).use(routes.allowedMethods());
  const uploads = uploadRoutes(parts);
  koa.use(uploads.routes()).use(uploads.allowedMethods());
  for (const router of parts.pluginRoutes) koa.use(router.routes()).use(router.allowedMethods());
  const koaHandler = koa.callback();
  const handleRpc = createRpcEndpoint({
    dispatcher: parts.dispatcher,
    metrics: parts.metrics,
    logger,
    options: { bodyLimitBytes: config.bodyLimitBytes, trustProxy: config.trustProxy, publicUrl: config.publicUrl },
  });

  return createServer((req: IncomingMessage, res: ServerResponse) => {
    const requestId = requestIdOf(req);
    if (req.method === 'POST' && (req.url === '/api/rpc' || req.url?.startsWith('/api/rpc?'))) {
      return handleRpc(req, res, requestId);
    }
    res.setHeader('x-request-id', requestId);
    void koaHandler(req, res);
  });
}

async function stopServer(server: Server, hub: WebSocketHub, timeoutMs: number): Promise<void> {
  const closed = new Promise<void>((resolve) => server.close(() => resolve()));
  server.closeIdleConnections();
  await hub.close();
  const timer = setTimeout(() => server.closeAllConnections(), timeoutMs);
  await closed;
  clearTimeout(timer);
}
