/** Defaults of the core's settings that are not secrets. Environment variables override them (see core/base/config.ts). */
export const defaults = {
  port: 3000,
  host: '127.0.0.1',
  dataDir: './data',
  logLevel: 'info',
  bodyLimitBytes: 1024 * 1024,
  /** Cached credentials are re-read from the database at most this often, even without an invalidation event. */
  authCacheTtlSeconds: 60,
  stepUpMaxAgeSeconds: 600,
  shutdownTimeoutMs: 10_000,
  /** WebSocket ping interval; each beat also re-checks every connection's credential. */
  wsHeartbeatSeconds: 30,
  /** WebSockets one user may hold open on one node, over all their sessions and API keys (a browser tab holds one). */
  wsMaxPerUser: 32,
  /** WebSockets one client address may hold open on one node; above the per-user cap, for offices behind one NAT address. */
  wsMaxPerAddress: 256,
  /** The largest file any upload may carry; each upload purpose may set a lower limit of its own. */
  uploadMaxBytes: 10 * 1024 * 1024,
  /** How long an upload key can be used to upload and then to finalize. */
  uploadKeyTtlSeconds: 15 * 60,
  /** How often an idle node looks for due background jobs; enqueues on the same node are picked up at once. */
  jobsPollMs: 2000,
  /** Heap of each worker thread, in MB: ample for parsing, embedding and git; a workflow expression gone wild meets it first. */
  workerMaxMemoryMb: 512,
  /** How long a worker task may run before its thread is stopped. */
  workerTaskTimeoutMs: 120_000,
} as const;
