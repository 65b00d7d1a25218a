import { availableParallelism } from 'node:os';
import path from 'node:path';
import * as v from 'valibot';
import { defaults } from '../config/defaults.ts';
import type { MessagingConfig } from './messaging/message-sender.ts';

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

const list = (text: string) =>
  text
    .split(',')
    .map((item) => item.trim())
    .filter(Boolean);

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
  SIGNUP_MODE: v.optional(v.picklist(['open', 'invite'], 'SIGNUP_MODE must be open or invite'), defaults.signupMode),
  SIGNUP_REQUIRE_EMAIL_VERIFICATION: v.optional(boolean('SIGNUP_REQUIRE_EMAIL_VERIFICATION'), 'false'),
  SIGNUP_REQUIRE_PHONE_VERIFICATION: v.optional(boolean('SIGNUP_REQUIRE_PHONE_VERIFICATION'), 'false'),
  SIGNUP_BLOCKED_EMAIL_DOMAINS: v.optional(v.string(), ''),
  SIGNUP_BLOCKED_EMAIL_PATTERNS: v.optional(
    v.pipe(
      v.string(),
      v.check((text) => list(text).every(isRegex), 'SIGNUP_BLOCKED_EMAIL_PATTERNS must be comma-separated regular expressions'),
    ),
    '',
  ),
  SIGNUP_RESERVED_USERNAMES: v.optional(v.string(), defaults.signupReservedUsernames),
  OTP_REQUEST_LIMIT: v.optional(integer('OTP_REQUEST_LIMIT', 1, 100000), String(defaults.otpRequestLimit)),
  OTP_REQUEST_IP_LIMIT: v.optional(integer('OTP_REQUEST_IP_LIMIT', 1, 100000), String(defaults.otpRequestIpLimit)),
  OTP_VERIFY_FAILURE_LIMIT: v.optional(integer('OTP_VERIFY_FAILURE_LIMIT', 1, 100000), String(defaults.otpVerifyFailureLimit)),
  OTP_WINDOW_SECONDS: v.optional(integer('OTP_WINDOW_SECONDS', 1, 86400), String(defaults.otpWindowSeconds)),
  SMTP_URL: v.optional(v.pipe(v.string(), v.regex(/^smtps?:\/\//, 'SMTP_URL must start with smtp:// or smtps://'))),
  MAIL_FROM: v.optional(v.pipe(v.string(), v.minLength(3)), defaults.mailFrom),
  SMS_API_URL: v.optional(v.pipe(v.string(), v.url('SMS_API_URL must be an absolute URL'))),
  SMS_ACCOUNT_SID: v.optional(v.string()),
  SMS_AUTH_TOKEN: v.optional(v.string()),
  SMS_FROM: v.optional(v.string()),
  WHATSAPP_FROM: v.optional(v.string()),
  OAUTH_PROVIDERS: v.optional(v.string(), ''),
  OAUTH_ALLOW_HTTP: v.optional(boolean('OAUTH_ALLOW_HTTP'), 'false'),
  WS_HEARTBEAT_SECONDS: v.optional(integer('WS_HEARTBEAT_SECONDS', 1, 3600), String(defaults.wsHeartbeatSeconds)),
  SHUTDOWN_TIMEOUT_MS: v.optional(integer('SHUTDOWN_TIMEOUT_MS', 0, 600_000), String(defaults.shutdownTimeoutMs)),
  UPLOAD_MAX_BYTES: v.optional(integer('UPLOAD_MAX_BYTES', 1, 2 ** 40), String(defaults.uploadMaxBytes)),
  UPLOAD_KEY_TTL_SECONDS: v.optional(integer('UPLOAD_KEY_TTL_SECONDS', 1, 7 * 24 * 3600), String(defaults.uploadKeyTtlSeconds)),
});

function isRegex(text: string): boolean {
  try {
    new RegExp(text, 'i');
    return true;
  } catch {
    return false;
  }
}

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
  /** Ceiling for every uploaded file, whatever its purpose allows. */
  uploadMaxBytes: number;
  uploadKeyTtlSeconds: number;
  signupMode: 'open' | 'invite';
  signupRequireEmailVerification: boolean;
  signupRequirePhoneVerification: boolean;
  /** Lower-case domains; each also blocks its subdomains. */
  signupBlockedEmailDomains: string[];
  signupBlockedEmailPatterns: RegExp[];
  /** Lower-case usernames nobody may sign up with. */
  signupReservedUsernames: string[];
  otpRequestLimit: number;
  otpRequestIpLimit: number;
  otpVerifyFailureLimit: number;
  otpWindowSeconds: number;
  messaging: MessagingConfig;
  oauthProviders: OAuthProviderConfig[];
  /** Allow http:// issuers (a local test provider); never in production. */
  oauthAllowHttp: boolean;
}

export interface OAuthProviderConfig {
  /** The name in /auth/<name>, lower-case. */
  name: string;
  issuer: string;
  clientId: string;
  clientSecret: string;
  scopes: string;
}

/** Issuers of the named presets; any other name needs OAUTH_<NAME>_ISSUER. */
const OAUTH_PRESETS: Record<string, string> = {
  google: 'https://accounts.google.com',
  gitlab: 'https://gitlab.com',
  apple: 'https://appleid.apple.com',
};

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
    signupMode: e.SIGNUP_MODE,
    signupRequireEmailVerification: e.SIGNUP_REQUIRE_EMAIL_VERIFICATION,
    signupRequirePhoneVerification: e.SIGNUP_REQUIRE_PHONE_VERIFICATION,
    signupBlockedEmailDomains: list(e.SIGNUP_BLOCKED_EMAIL_DOMAINS.toLowerCase()),
    signupBlockedEmailPatterns: list(e.SIGNUP_BLOCKED_EMAIL_PATTERNS).map((pattern) => new RegExp(pattern, 'i')),
    signupReservedUsernames: list(e.SIGNUP_RESERVED_USERNAMES.toLowerCase()),
    otpRequestLimit: e.OTP_REQUEST_LIMIT,
    otpRequestIpLimit: e.OTP_REQUEST_IP_LIMIT,
    otpVerifyFailureLimit: e.OTP_VERIFY_FAILURE_LIMIT,
    otpWindowSeconds: e.OTP_WINDOW_SECONDS,
    messaging: messagingConfig(e),
    oauthProviders: oauthProviders(e.OAUTH_PROVIDERS, env),
    oauthAllowHttp: e.OAUTH_ALLOW_HTTP,
    uploadMaxBytes: e.UPLOAD_MAX_BYTES,
    uploadKeyTtlSeconds: e.UPLOAD_KEY_TTL_SECONDS,
  };
}

function messagingConfig(e: v.InferOutput<typeof EnvSchema>): MessagingConfig {
  const sms =
    e.SMS_API_URL && e.SMS_ACCOUNT_SID && e.SMS_AUTH_TOKEN
      ? { apiUrl: e.SMS_API_URL, accountSid: e.SMS_ACCOUNT_SID, authToken: e.SMS_AUTH_TOKEN, smsFrom: e.SMS_FROM, whatsappFrom: e.WHATSAPP_FROM }
      : undefined;
  if (!sms && (e.SMS_API_URL || e.SMS_ACCOUNT_SID || e.SMS_AUTH_TOKEN)) {
    throw new ConfigError('Invalid configuration: SMS_API_URL, SMS_ACCOUNT_SID and SMS_AUTH_TOKEN go together');
  }
  return { smtpUrl: e.SMTP_URL, mailFrom: e.MAIL_FROM, sms };
}

/** `OAUTH_PROVIDERS=google,acme` with `OAUTH_<NAME>_CLIENT_ID`, `_CLIENT_SECRET`, `_ISSUER` (presets know theirs), `_SCOPES`. */
function oauthProviders(names: string, env: NodeJS.ProcessEnv): OAuthProviderConfig[] {
  return list(names.toLowerCase()).map((name) => {
    if (!/^[a-z][a-z0-9-]*$/.test(name)) throw new ConfigError(`Invalid configuration: OAuth provider name "${name}" must be lower-case letters, digits and dashes`);
    const key = `OAUTH_${name.toUpperCase().replace(/-/g, '_')}`;
    const issuer = env[`${key}_ISSUER`] || OAUTH_PRESETS[name];
    const clientId = env[`${key}_CLIENT_ID`];
    const clientSecret = env[`${key}_CLIENT_SECRET`];
    const missing = [!issuer && `${key}_ISSUER`, !clientId && `${key}_CLIENT_ID`, !clientSecret && `${key}_CLIENT_SECRET`].filter(Boolean);
    if (missing.length > 0) throw new ConfigError(`Invalid configuration: OAuth provider "${name}" needs ${missing.join(', ')}`);
    if (!URL.canParse(issuer!)) throw new ConfigError(`Invalid configuration: ${key}_ISSUER must be a URL`);
    return { name, issuer: issuer!, clientId: clientId!, clientSecret: clientSecret!, scopes: env[`${key}_SCOPES`] || 'openid email profile' };
  });
}
