import { availableParallelism } from 'node:os';
import path from 'node:path';
import * as v from 'valibot';
import { defaults } from '../config/defaults.ts';

const LOG_LEVELS = ['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'] as const;

const integer = (name: string, min: number, max: number) =>
  v.pipe(
    v.string(),
    v.regex(/^\d+$/, `${name} must be a whole number`),
    v.transform(Number),
    v.minValue(min, `${name} must be at least ${min}`),
    v.maxValue(max, `${name} must be at most ${max}`),
  );

const boolean = (name: string) =>
  v.pipe(
    v.picklist(['true', 'false', '1', '0'], `${name} must be true or false`),
    v.transform((value) => value === 'true' || value === '1'),
  );

const EnvSchema = v.object({
  PORT: v.optional(integer('PORT', 0, 65535), String(defaults.port)),
  HOST: v.optional(v.pipe(v.string(), v.minLength(1)), defaults.host),
  DATA_DIR: v.optional(v.pipe(v.string(), v.minLength(1)), defaults.dataDir),
  DATABASE_URL: v.optional(
    v.pipe(v.string(), v.regex(/^postgres(ql)?:\/\//, 'DATABASE_URL must start with postgres:// or postgresql://')),
  ),
  MASTER_KEY: v.optional(v.string()),
  PUBLIC_URL: v.optional(v.pipe(v.string(), v.url('PUBLIC_URL must be an absolute URL'))),
  LOG_LEVEL: v.optional(v.picklist(LOG_LEVELS, `LOG_LEVEL must be one of ${LOG_LEVELS.join(', ')}`), defaults.logLevel),
  WORKERS: v.optional(integer('WORKERS', 1, 256)),
  PLUGINS: v.optional(v.string(), ''),
  BODY_LIMIT_BYTES: v.optional(integer('BODY_LIMIT_BYTES', 1024, 64 * 1024 * 1024), String(defaults.bodyLimitBytes)),
  SESSION_TTL_SECONDS: v.optional(integer('SESSION_TTL_SECONDS', 1, 365 * 24 * 3600), String(defaults.sessionTtlSeconds)),
  AUTH_CACHE_TTL_SECONDS: v.optional(integer('AUTH_CACHE_TTL_SECONDS', 0, 3600), String(defaults.authCacheTtlSeconds)),
  LOGIN_FAILURE_LIMIT: v.optional(integer('LOGIN_FAILURE_LIMIT', 1, 100000), String(defaults.loginFailureLimit)),
  LOGIN_FAILURE_WINDOW_SECONDS: v.optional(
    integer('LOGIN_FAILURE_WINDOW_SECONDS', 1, 86400),
    String(defaults.loginFailureWindowSeconds),
  ),
  TRUST_PROXY: v.optional(boolean('TRUST_PROXY'), 'false'),
  WS_HEARTBEAT_SECONDS: v.optional(integer('WS_HEARTBEAT_SECONDS', 1, 3600), String(defaults.wsHeartbeatSeconds)),
  SHUTDOWN_TIMEOUT_MS: v.optional(integer('SHUTDOWN_TIMEOUT_MS', 0, 600_000), String(defaults.shutdownTimeoutMs)),
});

export interface Config {
  port: number;
  host: string;
  dataDir: string;
  /** Set: a real PostgreSQL; unset: the embedded PGlite database under dataDir. */
  databaseUrl?: string;
  /** Base64 text of 32 bytes; resolved (or generated) by core/auth/master-key.ts. */
  masterKey?: string;
  publicUrl?: string;
  logLevel: (typeof LOG_LEVELS)[number];
  workers: number;
  /** npm package names (or paths) of third-party plugins. */
  plugins: string[];
  bodyLimitBytes: number;
  sessionTtlSeconds: number;
  authCacheTtlSeconds: number;
  loginFailureLimit: number;
  loginFailureWindowSeconds: number;
  /** Take the client address from X-Forwarded-For (only behind a proxy you run). */
  trustProxy: boolean;
  /** How long shutdown waits for open requests before cutting connections. */
  shutdownTimeoutMs: number;
  wsHeartbeatSeconds: number;
}

export class ConfigError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'ConfigError';
  }
}

/** Reads and checks the configuration; every problem is named in one error. */
export function loadConfig(env: NodeJS.ProcessEnv = process.env): Config {
  const present = Object.fromEntries(Object.entries(env).filter(([, value]) => value !== undefined && value !== ''));
  const result = v.safeParse(EnvSchema, present);
  if (!result.success) {
    const problems = result.issues.map((issue) => {
      const key = issue.path?.map((item) => String(item.key)).join('.') ?? '';
      return issue.message.includes(key) ? issue.message : `${key}: ${issue.message}`;
    });
    throw new ConfigError(`Invalid configuration: ${problems.join('; ')}`);
  }
  const e = result.output;
  return {
    port: e.PORT,
    host: e.HOST,
    dataDir: path.resolve(e.DATA_DIR),
    databaseUrl: e.DATABASE_URL,
    masterKey: e.MASTER_KEY,
    publicUrl: e.PUBLIC_URL?.replace(/\/+$/, ''),
    logLevel: e.LOG_LEVEL,
    workers: e.WORKERS ?? availableParallelism(),
    plugins: e.PLUGINS.split(',')
      .map((name) => name.trim())
      .filter(Boolean),
    bodyLimitBytes: e.BODY_LIMIT_BYTES,
    sessionTtlSeconds: e.SESSION_TTL_SECONDS,
    authCacheTtlSeconds: e.AUTH_CACHE_TTL_SECONDS,
    loginFailureLimit: e.LOGIN_FAILURE_LIMIT,
    loginFailureWindowSeconds: e.LOGIN_FAILURE_WINDOW_SECONDS,
    trustProxy: e.TRUST_PROXY,
    shutdownTimeoutMs: e.SHUTDOWN_TIMEOUT_MS,
    wsHeartbeatSeconds: e.WS_HEARTBEAT_SECONDS,
  };
}
