// The options of a client and of one call: apart from client.ts, so that the generated operations.ts can name them without importing the client.
export interface ClientOptions {
  /** Where the service answers, e.g. `https://api.example.com` (no path). */
  baseUrl: string;
  /** An API key (sent as `X-API-Key`). */
  apiKey?: string;
  /** A session token from `AuthRpc.login` (sent as `Authorization: Bearer`). */
  token?: string;
  /** How many times a call refused with 429 or 503 is tried again (default 3). */
  retries?: number;
  /** The longest wait before a retry (default 30 s): a later `Retry-After` fails the call at once instead. */
  maxRetryDelayMs?: number;
  /** Another fetch (a test double, a proxy agent); the global one by default. */
  fetch?: typeof fetch;
}

export interface CallOptions {
  signal?: AbortSignal;
  /** Overrides the client's `retries` for this call. */
  retries?: number;
}
