import { accessSync, constants, existsSync, mkdirSync, readdirSync, statSync } from 'node:fs';
import { availableParallelism } from 'node:os';
import path from 'node:path';
import * as v from 'valibot';
import { defaults } from '../../config/defaults.ts';
import type { OutboundPolicy } from './outbound.ts';
import { openFileLimit } from './open-files.ts';
import { ConfigError, env, parseSettings, setting, settings, splitList } from './settings.ts';

export { ConfigError };

const LOG_LEVELS = ['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'] as const;
/** OpenTelemetry's sampler names (its environment specification), as OTEL_TRACES_SAMPLER takes them. */
const SAMPLERS = ['always_on', 'always_off', 'traceidratio', 'parentbased_always_on', 'parentbased_always_off', 'parentbased_traceidratio'] as const;

const postgresUrl = (name: string) => v.pipe(v.string(), v.regex(/^postgres(ql)?:\/\//, `${name} must start with postgres:// or postgresql://`));

/** The core's own environment settings; each plugin declares its own in `definePlugin({config})`. */
export const CoreSettings = settings({
  PORT: setting(env.integer(0, 65535), 'HTTP port', String(defaults.port)),
  HOST: setting(v.pipe(v.string(), v.minLength(1)), 'interface to listen on (0.0.0.0 for all)', defaults.host),
  DATA_DIR: setting(v.pipe(v.string(), v.minLength(1)), 'embedded database, generated master key, uploaded files', defaults.dataDir),
  DATABASE_URL: setting(postgresUrl, 'postgres://...: use this PostgreSQL (with pgvector) instead of the embedded database'),
  DATABASE_DIRECT_URL: setting(
    postgresUrl,
    'postgres://... straight to the server, when DATABASE_URL goes through a pooler in transaction mode (PgBouncer): used only for what needs a session (LISTEN, the migration lock, pg_dump)',
  ),
  MASTER_KEY: setting(v.string(), '32 bytes in base64; encrypts keys and secrets at rest (required with DATABASE_URL)'),
  MASTER_KEY_PREVIOUS: setting(v.string(), 'comma-separated master keys MASTER_KEY replaces, still read until rotate-master-key has run', ''),
  PUBLIC_URL: setting(env.url(), 'the URL users reach the service at'),
  LOG_LEVEL: setting(env.oneOf(LOG_LEVELS), 'log level', defaults.logLevel),
  WORKERS: setting(env.integer(1, 256), 'worker threads for CPU-heavy work (default: CPU cores)'),
  WORKER_MAX_MEMORY_MB: setting(
    env.integer(16, 65_536),
    'heap of each worker thread in MB: a task needing more fails and its thread is replaced, the process goes on',
    String(defaults.workerMaxMemoryMb),
  ),
  WORKER_TASK_TIMEOUT_MS: setting(
    env.integer(100, 3_600_000),
    'a worker task (embedding, parsing, git) still running after this long is stopped with its thread, in milliseconds',
    String(defaults.workerTaskTimeoutMs),
  ),
  PLUGINS: setting(v.string(), 'comma-separated npm package names (or paths) of third-party plugins', ''),
  BODY_LIMIT_BYTES: setting(env.integer(1024, 64 * 1024 * 1024), 'largest accepted request body', String(defaults.bodyLimitBytes)),
  AUTH_CACHE_TTL_SECONDS: setting(env.integer(0, 3600), 'how long a verified credential is trusted from memory', String(defaults.authCacheTtlSeconds)),
  STEP_UP_MAX_AGE_SECONDS: setting(
    env.integer(30, 86_400),
    'how recent a session’s sign-in (or step-up) must be for operations that need one: revealing a secret, a role, a new API key, factors',
    String(defaults.stepUpMaxAgeSeconds),
  ),
  TRUST_PROXY: setting(env.boolean(), 'take client address and scheme from X-Forwarded-*', 'false'),
  CHECK_RESULTS: setting(
    env.boolean(),
    "check every operation's answer against its declared result schema; a mismatch answers INTERNAL (the tests turn it on)",
    'false',
  ),
  WS_ALLOWED_ORIGINS: setting(
    (name) =>
      v.pipe(
        v.string(),
        v.check(
          (text) => splitList(text).every((origin) => URL.canParse(origin) && new URL(origin).origin === origin),
          `${name} must be comma-separated origins such as https://app.example.com (scheme, host and port only)`,
        ),
      ),
    "origins besides the service's own (and PUBLIC_URL's) whose pages may open /ws with the session cookie",
    '',
  ),
  WS_HEARTBEAT_SECONDS: setting(env.integer(1, 3600), 'WebSocket ping interval', String(defaults.wsHeartbeatSeconds)),
  WS_MAX_PER_USER: setting(env.integer(1, 1_000_000), 'WebSockets one user may hold open on this node', String(defaults.wsMaxPerUser)),
  WS_MAX_PER_ADDRESS: setting(env.integer(1, 1_000_000), 'WebSockets one client address may hold open on this node', String(defaults.wsMaxPerAddress)),
  WS_MAX_CONNECTIONS: setting(
    env.integer(1, 10_000_000),
    'WebSockets open on this node in all (default: half the open-file limit, ulimit -n, read at start, at most 50000)',
  ),
  SHUTDOWN_TIMEOUT_MS: setting(env.integer(0, 600_000), 'on SIGTERM, how long open requests may finish', String(defaults.shutdownTimeoutMs)),
  UPLOAD_MAX_BYTES: setting(env.integer(1, 2 ** 40), 'largest uploaded file', String(defaults.uploadMaxBytes)),
  UPLOAD_KEY_TTL_SECONDS: setting(env.integer(1, 7 * 24 * 3600), 'how long an upload key can be used', String(defaults.uploadKeyTtlSeconds)),
  FILE_STORAGE: setting(
    env.oneOf(['disk', 'database']),
    'where uploaded files are kept: disk (DATA_DIR/files) or database (default: database with DATABASE_URL, disk otherwise)',
  ),
  JOBS_POLL_MS: setting(
    env.integer(500, 60_000),
    'how often an idle node looks for background jobs it was not woken for (delayed ones, retries)',
    String(defaults.jobsPollMs),
  ),
  AI_CATALOGUE_FILE: setting(
    v.pipe(v.string(), v.minLength(1)),
    'a JSON AI catalogue (providers, models, defaults, recommendations) replacing config/ai-catalogue.json',
  ),
  AI_TIMEOUT_MS: setting(env.integer(100, 600_000), 'an AI provider not answering an attempt within this is retried', '30000'),
  AI_MAX_RETRIES: setting(env.integer(0, 10), 'retries of an AI call after 429, 5xx or no answer', '3'),
  OUTBOUND_ALLOW_PRIVATE: setting(env.boolean(), 'let requests made for tenants reach loopback, private and link-local addresses', 'false'),
  OUTBOUND_ALLOWED_HOSTS: setting(v.string(), 'comma-separated hosts (name or name:port) requests made for tenants may reach whatever they resolve to', ''),
  OUTBOUND_CA_FILE: setting(
    v.pipe(v.string(), v.minLength(1)),
    'a PEM file of certificate authorities that requests made for tenants trust besides the public ones (a private CA of your network)',
  ),
  METRICS_TOKEN: setting(
    (name) => v.pipe(v.string(), v.regex(/^\S+$/, `${name} must not contain spaces`), v.minLength(16, `${name} must be at least 16 characters`)),
    'a secret: /metrics then requires Authorization: Bearer <it> (unset: /metrics is open)',
  ),
  OTEL_EXPORTER_OTLP_ENDPOINT: setting(
    env.url(),
    'OTLP/HTTP collector: traces are sent to <it>/v1/traces (unset, with OTEL_EXPORTER_OTLP_TRACES_ENDPOINT unset: no tracing, at no cost)',
  ),
  OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: setting(env.url(), 'the full OTLP/HTTP URL traces are sent to, instead of OTEL_EXPORTER_OTLP_ENDPOINT/v1/traces'),
  OTEL_SERVICE_NAME: setting(v.pipe(v.string(), v.minLength(1)), "the traces' service.name", 'rpc-service'),
  OTEL_TRACES_SAMPLER: setting(env.oneOf(SAMPLERS), 'which traces are recorded', 'parentbased_always_on'),
  OTEL_TRACES_SAMPLER_ARG: setting(
    (name) => v.pipe(v.string(), v.transform(Number), v.number(`${name} must be a number`), v.minValue(0), v.maxValue(1)),
    'the ratio of the traceidratio samplers, from 0 to 1',
    '1',
  ),
  OTEL_BSP_SCHEDULE_DELAY: setting(env.integer(0, 600_000), 'how long finished spans wait to be sent together, in milliseconds', '5000'),
  OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT: setting(
    env.boolean(),
    "put chat calls' messages and answers on their spans (gen_ai.input.messages, gen_ai.output.messages); they may hold personal data",
    'false',
  ),
});

export const CORE_SETTING_NAMES = Object.keys(CoreSettings.entries);

/** How many WebSockets may be open on this node (WS_MAX_PER_USER, WS_MAX_PER_ADDRESS, WS_MAX_CONNECTIONS). */
export interface WebSocketLimits {
  /** Open sockets of one user, over all their sessions and API keys. */
  perUser: number;
  /** Open sockets and upgrades under way from one client address. */
  perAddress: number;
  /** Open sockets and upgrades under way in all. */
  total: number;
}

export interface Config {
  port: number;
  host: string;
  dataDir: string;
  /** Set: a real PostgreSQL; unset: the embedded PGlite database under dataDir. */
  databaseUrl?: string;
  /** Set when databaseUrl is a pooler in transaction mode: the server itself, for what needs a session. */
  databaseDirectUrl?: string;
  /** Base64 text of 32 bytes; resolved (or generated) by core/credentials/master-key.ts. */
  masterKey?: string;
  /** Comma-separated earlier master keys, read during a rotation. */
  masterKeyPrevious?: string;
  publicUrl?: string;
  logLevel: (typeof LOG_LEVELS)[number];
  workers: number;
  workerMaxMemoryMb: number;
  workerTaskTimeoutMs: number;
  /** npm package names (or paths) of third-party plugins. */
  plugins: string[];
  bodyLimitBytes: number;
  authCacheTtlSeconds: number;
  /** How recent a sign-in the operations that ask for a step-up accept (STEP_UP_MAX_AGE_SECONDS). */
  stepUpMaxAgeSeconds: number;
  /** Take the client address from X-Forwarded-For (only behind a proxy you run). */
  trustProxy: boolean;
  /** Check every answer against the operation's declared result (CHECK_RESULTS). */
  checkResults: boolean;
  /** How long shutdown waits for open requests before cutting connections. */
  shutdownTimeoutMs: number;
  wsHeartbeatSeconds: number;
  wsLimits: WebSocketLimits;
  /** Origins besides the service's own whose pages may open /ws with the session cookie (WS_ALLOWED_ORIGINS). */
  wsAllowedOrigins: string[];
  /** Ceiling for every uploaded file, whatever its purpose allows. */
  uploadMaxBytes: number;
  uploadKeyTtlSeconds: number;
  /** Where uploaded files' bytes are kept (FILE_STORAGE). */
  fileStorage: 'disk' | 'database';
  jobsPollMs: number;
  /** Unset: config/ai-catalogue.json. */
  aiCatalogueFile?: string;
  aiTimeoutMs: number;
  aiMaxRetries: number;
  outbound: OutboundPolicy;
  /** Set: /metrics requires it as a bearer token. */
  metricsToken?: string;
  /** Set when traces are exported (an OTLP endpoint is set): core/base/telemetry.ts. */
  tracing?: TracingConfig;
  /** The environment the configuration was read from: plugins read their own settings from it. */
  env: Readonly<Record<string, string | undefined>>;
}

/** Where and how spans are exported (the OTEL_* settings). */
export interface TracingConfig {
  serviceName: string;
  /** The OTLP/HTTP URL spans are posted to. */
  url: string;
  sampler: (typeof SAMPLERS)[number];
  samplerRatio: number;
  scheduleDelayMs: number;
  /** Chat calls' messages and answers on their spans (OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT). */
  captureAiContent: boolean;
}

/** Tracing's settings when an OTLP endpoint is set, as OpenTelemetry's environment specification reads them. */
function tracingConfig(e: v.InferOutput<typeof CoreSettings>): TracingConfig | undefined {
  const base = e.OTEL_EXPORTER_OTLP_ENDPOINT?.replace(/\/+$/, '');
  const url = e.OTEL_EXPORTER_OTLP_TRACES_ENDPOINT ?? (base === undefined ? undefined : `${base}/v1/traces`);
  if (url === undefined) return undefined;
  return {
    serviceName: e.OTEL_SERVICE_NAME,
    url,
    sampler: e.OTEL_TRACES_SAMPLER,
    samplerRatio: e.OTEL_TRACES_SAMPLER_ARG,
    scheduleDelayMs: e.OTEL_BSP_SCHEDULE_DELAY,
    captureAiContent: e.OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT,
  };
}

/** Reads and checks the core's configuration; every problem is named in one error. */
export function loadConfig(environment: NodeJS.ProcessEnv = process.env): Config {
  const e = parseSettings(CoreSettings, environment);
  if (e.DATABASE_DIRECT_URL && !e.DATABASE_URL)
    throw new ConfigError('DATABASE_DIRECT_URL is set without DATABASE_URL: set DATABASE_URL to the pooler, or leave both unset');
  return {
    port: e.PORT,
    host: e.HOST,
    dataDir: path.resolve(e.DATA_DIR),
    databaseUrl: e.DATABASE_URL,
    databaseDirectUrl: e.DATABASE_DIRECT_URL,
    masterKey: e.MASTER_KEY,
    masterKeyPrevious: e.MASTER_KEY_PREVIOUS,
    publicUrl: e.PUBLIC_URL?.replace(/\/+$/, ''),
    logLevel: e.LOG_LEVEL,
    workers: e.WORKERS ?? availableParallelism(),
    workerMaxMemoryMb: e.WORKER_MAX_MEMORY_MB,
    workerTaskTimeoutMs: e.WORKER_TASK_TIMEOUT_MS,
    plugins: splitList(e.PLUGINS),
    bodyLimitBytes: e.BODY_LIMIT_BYTES,
    authCacheTtlSeconds: e.AUTH_CACHE_TTL_SECONDS,
    stepUpMaxAgeSeconds: e.STEP_UP_MAX_AGE_SECONDS,
    trustProxy: e.TRUST_PROXY,
    checkResults: e.CHECK_RESULTS,
    shutdownTimeoutMs: e.SHUTDOWN_TIMEOUT_MS,
    wsHeartbeatSeconds: e.WS_HEARTBEAT_SECONDS,
    wsLimits: webSocketLimits(e),
    wsAllowedOrigins: splitList(e.WS_ALLOWED_ORIGINS),
    uploadMaxBytes: e.UPLOAD_MAX_BYTES,
    uploadKeyTtlSeconds: e.UPLOAD_KEY_TTL_SECONDS,
    fileStorage: e.FILE_STORAGE ?? (e.DATABASE_URL ? 'database' : 'disk'),
    jobsPollMs: e.JOBS_POLL_MS,
    aiCatalogueFile: e.AI_CATALOGUE_FILE ? path.resolve(e.AI_CATALOGUE_FILE) : undefined,
    aiTimeoutMs: e.AI_TIMEOUT_MS,
    aiMaxRetries: e.AI_MAX_RETRIES,
    outbound: {
      allowPrivate: e.OUTBOUND_ALLOW_PRIVATE,
      allowedHosts: splitList(e.OUTBOUND_ALLOWED_HOSTS).map((host) => host.toLowerCase()),
      ...(e.OUTBOUND_CA_FILE ? { caFile: path.resolve(e.OUTBOUND_CA_FILE) } : {}),
    },
    metricsToken: e.METRICS_TOKEN,
    tracing: tracingConfig(e),
    env: { ...environment },
  };
}

/**
 * Makes a folder under DATA_DIR (or DATA_DIR itself), private to this user,
 * and checks it can be written and that no other user can: a DATA_DIR that
 * cannot hold it, or that others may write, stops start-up with a message
 * saying what to do.
 */
export function makeDataFolder(folder: string): void {
  try {
    mkdirSync(folder, { recursive: true, mode: 0o700 });
    accessSync(folder, constants.W_OK);
  } catch (error) {
    throw new ConfigError(`DATA_DIR cannot be used: ${(error as Error).message}; set DATA_DIR to a folder this user can write`);
  }
  const open = writableByOthers(folder);
  if (open) throw new ConfigError(`DATA_DIR cannot be used: ${open}`);
}

/**
 * Why a folder of DATA_DIR is not safe, or null: one its group or every user
 * may write lets another user replace what the service keeps there, such as
 * the control socket through which `admin create` sends a password.
 */
export function writableByOthers(folder: string): string | null {
  const { mode } = statSync(folder);
  if ((mode & 0o022) === 0) return null;
  const who = mode & 0o002 ? 'every user' : 'its group';
  return `${folder} is writable by ${who} (mode ${(mode & 0o7777).toString(8).padStart(4, '0')}), so another user could replace the files the service keeps there (its control socket among them): make it private with chmod 700 ${folder}`;
}

/** A connection to PostgreSQL that keeps its session (LISTEN, session locks, pg_dump): the direct URL behind a pooler, else DATABASE_URL. */
export const sessionDatabaseUrl = (config: Config): string | undefined => config.databaseDirectUrl ?? config.databaseUrl;

/** The embedded database's folder under DATA_DIR. */
export const embeddedDatabaseDir = (dataDir: string): string => path.join(dataDir, 'db');

/** Whether DATA_DIR holds an embedded database: an installation has been made there. */
export const hasEmbeddedDatabase = (dataDir: string): boolean => {
  const folder = embeddedDatabaseDir(dataDir);
  return existsSync(folder) && readdirSync(folder).length > 0;
};

/** Open files kept from WebSockets for HTTP requests, the database, uploads and logs. */
const RESERVED_OPEN_FILES = 256;
/** The default total where the open-file limit is high: past it memory binds first (see docs/decisions/0030-how-many-websockets.md). */
const DEFAULT_MAX_WEBSOCKETS = 50_000;

/**
 * The WebSocket caps. Each socket holds a descriptor: by default they may take
 * half of what the process may open, so RPC calls and the database always
 * keep the other half; a total set by hand must leave RESERVED_OPEN_FILES.
 */
function webSocketLimits(e: v.InferOutput<typeof CoreSettings>): WebSocketLimits {
  const openFiles = openFileLimit();
  const limits = {
    perUser: e.WS_MAX_PER_USER,
    perAddress: e.WS_MAX_PER_ADDRESS,
    total: e.WS_MAX_CONNECTIONS ?? Math.max(1, Math.min(DEFAULT_MAX_WEBSOCKETS, Math.floor(openFiles / 2))),
  };
  if (e.WS_MAX_CONNECTIONS !== undefined && e.WS_MAX_CONNECTIONS > openFiles - RESERVED_OPEN_FILES) {
    throw new ConfigError(
      `WS_MAX_CONNECTIONS ${e.WS_MAX_CONNECTIONS} leaves fewer than ${RESERVED_OPEN_FILES} of the ${openFiles} files this process may open (ulimit -n) ` +
        'for requests and the database; lower it, or raise the limit',
    );
  }
  return limits;
}
