/** Defaults for settings that are not secrets. Environment variables override them (see core/config.ts). */
export const defaults = {
  port: 3000,
  host: '127.0.0.1',
  dataDir: './data',
  logLevel: 'info',
  bodyLimitBytes: 1024 * 1024,
  /** Sessions expire after this long without use (sliding). */
  sessionTtlSeconds: 30 * 24 * 3600,
  /** Cached credentials are re-read from the database at most this often, even without an invalidation event. */
  authCacheTtlSeconds: 60,
  shutdownTimeoutMs: 10_000,
  /** WebSocket ping interval; each beat also re-checks every connection's credential. */
  wsHeartbeatSeconds: 30,
  /** Failed logins allowed per identifier and per client address in one window. */
  loginFailureLimit: 10,
  loginFailureWindowSeconds: 900,
} as const;
