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
  /** The largest file any upload may carry; each upload purpose may set a lower limit of its own. */
  uploadMaxBytes: 10 * 1024 * 1024,
  /** How long an upload key can be used to upload and then to finalize. */
  uploadKeyTtlSeconds: 15 * 60,
  /** Who may sign up: anyone (`open`) or holders of an invite code (`invite`). */
  signupMode: 'open',
  signupReservedUsernames: 'admin,administrator,root,system,support,help,security,api,www,mail,postmaster,abuse,noreply,no-reply',
  /** One-time code requests allowed per identifier, and per client address, in one window. */
  otpRequestLimit: 5,
  otpRequestIpLimit: 30,
  /** Wrong codes allowed per client address in one window (each request also allows only five). */
  otpVerifyFailureLimit: 30,
  otpWindowSeconds: 900,
  mailFrom: 'rpc-service <no-reply@localhost>',
} as const;
