import type { Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import Router from '@koa/router';
import { asFunction, asValue, createContainer, InjectionMode, type AwilixContainer } from 'awilix';
import type { DestinationStream } from 'pino';
import { CoreSettings, sessionDatabaseUrl, type Config } from '../base/config.ts';
import { Authenticator, credentialsPoint, type CredentialScheme, type CredentialVerifier } from '../credentials/authenticator.ts';
import { Credentials } from '../credentials/credentials.ts';
import { SecretBox } from '../credentials/crypto.ts';
import { Keyring } from '../credentials/keyring.ts';
import { resolveMasterKeys } from '../credentials/master-key.ts';
import { AuditLog } from '../audit/audit-log.ts';
import { AiClient, aiCallsPoint } from '../ai/ai-client.ts';
import { loadCatalogue } from '../ai/catalogue.ts';
import { ToolCatalogue, toolsPoint } from '../rpc/tools.ts';
import { ResourceCatalogue, resourcesPoint } from '../rpc/resources.ts';
import { CollectionCatalogue, collectionsPoint } from '../records/collections.ts';
import { DataScopeCatalogue, dataScopesPoint } from '../records/data-scopes.ts';
import { DataFolders } from '../base/data-folders.ts';
import { coreEntities } from '../plugin/core-entities.ts';
import { migrations as coreMigrations } from '../db/migrations/index.ts';
import { openDatabase, type Database } from '../db/orm.ts';
import { EventBus } from '../events/bus.ts';
import { eventsPoint, type EventDeclaration } from '../events/catalogue.ts';
import { Metrics } from '../base/metrics.ts';
import { beyondLoopback } from '../doors/metrics.ts';
import { HttpHelpers } from '../doors/request-info.ts';
import { createHttpServer, listenOn, stopServer } from '../doors/server.ts';
import { Outbound } from '../base/outbound.ts';
import { JobService, type RegisteredJob } from '../jobs/job-service.ts';
import { createLogger, type Logger } from '../base/logger.ts';
import { startTracing } from '../base/telemetry.ts';
import type { Plugin } from '../plugin/define.ts';
import { PluginLoadError } from '../base/plugin-errors.ts';
import { ExtensionRegistry } from '../base/extension-points.ts';
import { checkContributions, discoverLocalPlugins, importPackagePlugins, selectPlugins, validatePlugins } from '../plugin/loader.ts';
import type { CoreServices } from '../plugin/services.ts';
import { WorkerPool } from '../pool/worker-pool.ts';
import { RateLimiter } from '../rate-limits/rate-limiter.ts';
import { createCaller, OperationCaller, type Caller, type CallerIdentity, type CallerOptions } from '../rpc/caller.ts';
import { Dispatcher } from '../rpc/dispatch.ts';
import { tenantDataPoint } from '../db/tenant-data.ts';
import { openRpcDocument } from '../rpc/openrpc.ts';
import { CORE_VERSION } from '../base/version.ts';
import { buildRegistry, type Registry } from '../rpc/registry.ts';
import { describeSettings, parseSettings, type SettingInfo } from '../base/settings.ts';
import { RequestPipeline } from '../rpc/pipeline.ts';
import { DatabaseStorage } from '../uploads/database-storage.ts';
import { DiskStorage, type FileStorage } from '../uploads/storage.ts';
import { UploadService } from '../uploads/upload-service.ts';

const PLUGINS_DIR = fileURLToPath(new URL('../../plugins/', import.meta.url));

/** The extension points of the core: plugins contribute to them like to any plugin's. */
export const CORE_EXTENSION_POINTS = [
  credentialsPoint,
  eventsPoint,
  toolsPoint,
  resourcesPoint,
  collectionsPoint,
  dataScopesPoint,
  aiCallsPoint,
  tenantDataPoint,
];

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
  /** Start only these plugins and those they need (a test backend for the plugins under test). */
  only?: readonly string[];
  /**
   * False for an operator command run in its own process (core/operator/):
   * the app answers calls, but takes no job from the queue and sweeps no
   * uploads, work a node that may exit any second should leave to the nodes
   * that serve. True by default.
   */
  background?: boolean;
}

export interface App {
  readonly config: Config;
  /** The core services, as plugins name them in `deps`. */
  readonly deps: CoreServices;
  readonly registry: Registry;
  readonly plugins: readonly Plugin[];
  /** The events of the catalogue, as `GET /api/rpc` lists them. */
  readonly events: readonly EventDeclaration[];
  /** Every contribution to the core's and the plugins' extension points (operator commands read core.tenantData). */
  readonly extensions: ExtensionRegistry;
  /** Where uploaded files' bytes are kept (FILE_STORAGE), for the operator's commands; plugins go through `uploadService`. */
  readonly fileStorage: FileStorage;
  readonly server: Server;
  readonly logger: Logger;
  /** The deps one plugin receives (its named services, own services, config, logger, extension points). */
  // eslint-disable-next-line @typescript-eslint/no-explicit-any -- each plugin types its deps (its Deps type), which the core cannot name; tests read them by name
  depsOf(pluginId: string): Record<string, any>;
  /** Calls operations in the process as a principal (null: anonymous) or with a request's credentials, without HTTP. */
  createCaller(who: CallerIdentity, options?: CallerOptions): Caller;
  listen(port?: number, host?: string): Promise<string>;
  close(): Promise<void>;
}

/** Every setting the core and the given plugins read, with defaults and descriptions (`npm start -- --print-config`). */
export function describeAllSettings(plugins: readonly Plugin[]): SettingInfo[] {
  return [...describeSettings(CoreSettings, 'core'), ...plugins.flatMap((plugin) => (plugin.config ? describeSettings(plugin.config, plugin.id) : []))];
}

/** The plugins of plugins/, of PLUGINS and given as objects, checked and in load order. */
export async function loadPlugins(options: AppOptions): Promise<Plugin[]> {
  const found = [
    ...(await discoverLocalPlugins(options.pluginsDir ?? PLUGINS_DIR)),
    ...(await importPackagePlugins(options.config.plugins)),
    ...(options.extraPlugins ?? []),
  ];
  // All are checked even when only some start, so a plugin's own tests meet the clashes an installation would refuse.
  const valid = validatePlugins(found, CORE_EXTENSION_POINTS);
  return options.only ? selectPlugins(valid, options.only) : valid;
}

/** Builds the whole service: plugins, database, services, HTTP and WebSocket endpoints. Does not listen yet. */
export async function createApp(options: AppOptions): Promise<App> {
  const { config } = options;
  const tracing = config.tracing ? await startTracing(config.tracing) : undefined;
  const logger = createLogger(config.logLevel, options.logStream, tracing !== undefined);
  const plugins = await loadPlugins(options);
  // Every plugin's settings are checked before anything opens, like the core's.
  const settings = new Map(plugins.map((plugin) => [plugin.id, plugin.config ? parseSettings(plugin.config, config.env) : {}]));
  const masterKeys = resolveMasterKeys(config, logger);
  const aiCatalogue = Object.freeze(loadCatalogue(config.aiCatalogueFile));
  const secretBox = new SecretBox(masterKeys);

  const db = await openDatabase({
    databaseUrl: config.databaseUrl,
    directUrl: config.databaseDirectUrl,
    dataDir: config.dataDir,
    inMemory: options.inMemoryDatabase,
    entities: [...coreEntities, ...plugins.flatMap((plugin) => plugin.entities ?? [])],
    migrations: [{ owner: 'core', migrations: coreMigrations }, ...plugins.map((plugin) => ({ owner: plugin.id, migrations: plugin.migrations ?? [] }))],
    logger,
  });
  const bus = new EventBus(logger);
  const pool = new WorkerPool({ size: config.workers, memoryMb: config.workerMaxMemoryMb, taskTimeoutMs: config.workerTaskTimeoutMs, logger });
  const jobService = new JobService({ db, logger, bus, pollMs: config.jobsPollMs });
  const outbound = new Outbound(config.outbound);
  const closeBase = async () => {
    await jobService.stop(config.shutdownTimeoutMs);
    await outbound.close();
    await bus.close();
    await pool.close();
    await db.close();
    await tracing?.stop();
  };

  try {
    await db.migrate();
    // LISTEN needs a session: behind a pooler, the direct connection.
    if (config.databaseUrl) await bus.startFanOut(sessionDatabaseUrl(config)!, (sql, params) => db.execute(sql, params));

    const metrics = new Metrics();
    const fileStorage = fileStorageOf(config, db);
    const uploadService = new UploadService({ db, config, logger, fileStorage });
    const core: CoreRoot = {
      db,
      bus,
      pool,
      uploadService,
      secretBox,
      keyring: new Keyring({ db, keys: masterKeys }),
      aiCatalogue,
      tools: new ToolCatalogue(),
      collections: new CollectionCatalogue(),
      dataScopes: new DataScopeCatalogue(),
      dataFolders: new DataFolders(config.dataDir),
      operations: new OperationCaller({ forkEm: (id) => db.forkEm(id), logger, stepUpMaxAgeMs: config.stepUpMaxAgeSeconds * 1000 }),
      ai: new AiClient({
        catalogue: aiCatalogue,
        pool,
        outbound,
        env: config.env,
        logger,
        timeoutMs: config.aiTimeoutMs,
        maxRetries: config.aiMaxRetries,
        metrics,
        captureContent: config.tracing?.captureAiContent === true,
      }),
      audit: new AuditLog({ db }),
      rateLimiter: new RateLimiter(db),
      credentials: new Credentials({ bus, cacheTtlSeconds: config.authCacheTtlSeconds }),
      http: new HttpHelpers({ trustProxy: config.trustProxy, publicUrl: config.publicUrl }),
      outbound,
      jobs: jobService,
      jobQueue: jobService,
    };

    const extensions = new ExtensionRegistry();
    for (const point of CORE_EXTENSION_POINTS) extensions.declare(point.id);
    for (const plugin of plugins) for (const point of plugin.extensionPoints ?? []) extensions.declare(point.id);
    const scopes = buildPluginScopes(plugins, core, settings, extensions, logger);
    jobService.register(pluginJobs(plugins, scopes));
    // Queues exist before the start hooks run, so those may enqueue; workers start once every plugin has started.
    await db.withSchemaLock(() => jobService.open());
    addContributions(plugins, scopes, extensions);
    const events = eventCatalogue(extensions);
    bus.useCatalogue(events, { checkPayloads: config.checkResults });

    const authenticator = new Authenticator(credentialVerifiers(extensions), core.credentials);
    const registry = buildRegistry(plugins, (plugin) => scopes.get(plugin.id)!.cradle);
    core.tools.load(extensions.all('core.tools'), registry);
    const resources = new ResourceCatalogue();
    resources.load(extensions.all('core.resources'), registry);
    core.collections.load(extensions.all('core.collections'));
    core.dataScopes.load(extensions.all('core.dataScopes'));
    core.ai.load(extensions.all('core.aiCalls'));
    const pipeline = new RequestPipeline(authenticator, {
      db,
      logger,
      rateLimiter: core.rateLimiter,
      eventGroups: eventGroupsOf(extensions, plugins),
      stepUpMaxAgeSeconds: config.stepUpMaxAgeSeconds,
    });
    bus.useAudience((principal, event) => pipeline.hears(principal, event));
    const dispatcher = new Dispatcher(registry, pipeline, { checkResults: config.checkResults });
    core.http.bind(pipeline, logger);
    core.operations.bind(dispatcher, { baseUrl: config.publicUrl });

    for (const plugin of plugins) {
      const deps = scopes.get(plugin.id)!.cradle;
      for (const [name, subscriber] of Object.entries(plugin.subscribers ?? {})) {
        bus.subscribe(name, (event) => subscriber(event, deps));
      }
      await plugin.start?.(deps);
    }
    if (options.background !== false) await jobService.start();

    const pluginRoutes = plugins.flatMap((plugin) => {
      if (!plugin.routes) return [];
      const router = new Router();
      plugin.routes(router, scopes.get(plugin.id)!.cradle);
      return [router];
    });
    const openRpc = openRpcDocument({
      version: CORE_VERSION,
      operations: registry.all(),
      events,
      pluginErrors: new Map(plugins.flatMap((plugin) => (plugin.errors ? [[plugin.id, plugin.errors] as const] : []))),
    });
    const { server, hub } = createHttpServer({
      config,
      registry,
      events,
      openRpc,
      db,
      metrics,
      dispatcher,
      pipeline,
      authenticator,
      resources,
      bus,
      rateLimiter: core.rateLimiter,
      uploadService,
      logger,
      pluginRoutes,
    });
    if (options.background !== false) uploadService.start();

    return {
      config,
      deps: core,
      registry,
      plugins,
      events,
      extensions,
      fileStorage,
      server,
      logger,
      depsOf(pluginId) {
        const scope = scopes.get(pluginId);
        if (!scope) throw new Error(`No plugin "${pluginId}" is loaded`);
        return scope.cradle;
      },
      createCaller: (who, callerOptions) => createCaller(dispatcher, who, { baseUrl: config.publicUrl, ...callerOptions }),
      async listen(port = config.port, host = config.host) {
        await listenOn(server, port, host);
        const address = server.address() as AddressInfo;
        const url = `http://${address.family === 'IPv6' ? `[${address.address}]` : address.address}:${address.port}`;
        logger.info({ url, database: db.kind, plugins: plugins.map((plugin) => plugin.id) }, 'listening');
        if (!config.metricsToken && beyondLoopback(address.address)) {
          logger.warn({ url }, '/metrics is open to anyone who reaches this address: set METRICS_TOKEN (or HOST to a loopback address)');
        }
        return url;
      },
      async close() {
        await stopServer(server, hub, config.shutdownTimeoutMs);
        await jobService.stop(config.shutdownTimeoutMs);
        for (const plugin of [...plugins].reverse()) await plugin.stop?.(scopes.get(plugin.id)!.cradle);
        await uploadService.stop();
        await closeBase();
        for (const scope of [...scopes.values()].reverse()) await scope.dispose();
      },
    };
  } catch (error) {
    await closeBase().catch(() => undefined);
    throw error;
  }
}

/**
 * One container per plugin holding exactly what it receives: the services it
 * named (core ones as values, other plugins' resolved from their exporter),
 * its own services, its settings, its logger and its extension points.
 */
function buildPluginScopes(
  plugins: readonly Plugin[],
  core: CoreRoot,
  settings: Map<string, unknown>,
  extensions: ExtensionRegistry,
  logger: Logger,
): Map<string, AwilixContainer> {
  const scopes = new Map<string, AwilixContainer>();
  const exporters = new Map<string, AwilixContainer>();
  for (const plugin of plugins) {
    const scope = createContainer({ injectionMode: InjectionMode.PROXY, strict: true });
    for (const name of plugin.deps ?? []) {
      if (name === 'jobs') scope.register(name, asValue(core.jobs.forPlugin(plugin.id)));
      else if (name === 'uploadService') scope.register(name, asValue(core.uploadService.forGroup(plugin.group)));
      else if (name in core) scope.register(name, asValue(core[name as keyof CoreServices]));
      else {
        const exporter = exporters.get(name)!;
        scope.register(name, asFunction(() => exporter.resolve(name)).singleton());
      }
    }
    scope.register({
      config: asValue(Object.freeze(settings.get(plugin.id))),
      logger: asValue(logger.child({ plugin: plugin.id })),
      extensions: asValue(
        extensions.scopedTo(
          `Plugin "${plugin.id}"`,
          (plugin.extensionPoints ?? []).map((point) => point.id),
        ),
      ),
    });
    scope.register(plugin.services ?? {});
    for (const name of plugin.exports ?? []) exporters.set(name, scope);
    scopes.set(plugin.id, scope);
  }
  return scopes;
}

/**
 * Where uploaded files' bytes go (FILE_STORAGE). In the database, files still
 * on disk from before are read and deleted there until they are moved
 * (`rpc-service files to-database`).
 */
function fileStorageOf(config: Config, db: Database): FileStorage {
  const disk = new DiskStorage(path.join(config.dataDir, 'files'));
  return config.fileStorage === 'database' ? new DatabaseStorage(db, disk) : disk;
}

/** The core services as the core holds them: `jobs` serves every plugin, each through its own view. */
type CoreRoot = Omit<CoreServices, 'jobs'> & { jobs: JobService };

/** Every plugin's jobs, each with the deps its handler receives. */
function pluginJobs(plugins: readonly Plugin[], scopes: Map<string, AwilixContainer>): RegisteredJob[] {
  return plugins.flatMap((plugin) =>
    Object.entries(plugin.jobs ?? {}).map(([name, definition]) => ({ pluginId: plugin.id, name, definition, deps: scopes.get(plugin.id)!.cradle })),
  );
}

/**
 * Each plugin's contributions, in load order. A contribution given as a
 * function of the plugin's deps is called now that they exist, and what it
 * returns is checked as validatePlugins checks the others.
 */
function addContributions(plugins: readonly Plugin[], scopes: Map<string, AwilixContainer>, extensions: ExtensionRegistry): void {
  const points = new Map([...CORE_EXTENSION_POINTS, ...plugins.flatMap((plugin) => plugin.extensionPoints ?? [])].map((point) => [point.id, point]));
  for (const plugin of plugins) {
    for (const [id, given] of Object.entries(plugin.extends ?? {})) {
      let contributions: readonly unknown[];
      if (typeof given === 'function') {
        contributions = given(scopes.get(plugin.id)!.cradle);
        checkContributions(plugin, points.get(id)!, contributions);
      } else contributions = given;
      for (const value of contributions) extensions.add(id, { pluginId: plugin.id, value });
    }
  }
}

/** The group of the plugin that declared each event of `core.events`. */
function eventGroupsOf(extensions: ExtensionRegistry, plugins: readonly Plugin[]): Map<string, string> {
  const groups = new Map(plugins.map((plugin) => [plugin.id, plugin.group]));
  return new Map(extensions.all('core.events').flatMap(({ pluginId, value }) => (groups.has(pluginId) ? [[value.name, groups.get(pluginId)!] as const] : [])));
}

/** The events of `core.events`; each name is declared once. */
function eventCatalogue(extensions: ExtensionRegistry): EventDeclaration[] {
  const owners = new Map<string, string>();
  return extensions.all('core.events').map(({ pluginId, value }) => {
    const owner = owners.get(value.name);
    if (owner) throw new PluginLoadError('PLUGIN_INVALID_CONTRIBUTION', `Plugin "${pluginId}": event "${value.name}" is already declared by plugin "${owner}"`);
    owners.set(value.name, pluginId);
    return value;
  });
}

/** The verifier of each credential scheme, from the plugins that contributed one. */
function credentialVerifiers(extensions: ExtensionRegistry): Partial<Record<CredentialScheme, CredentialVerifier>> {
  const verifiers: Partial<Record<CredentialScheme, CredentialVerifier>> = {};
  for (const { pluginId, value } of extensions.all('core.credentials')) {
    if (verifiers[value.scheme]) {
      throw new PluginLoadError('PLUGIN_INVALID_CONTRIBUTION', `Plugin "${pluginId}": the ${value.scheme} credential scheme already has a verifier`);
    }
    verifiers[value.scheme] = value.verifier;
  }
  return verifiers;
}
