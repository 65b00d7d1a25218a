import { fileURLToPath } from 'node:url';
import type { Plugin } from 'rpc-service/plugin';
import { startTestService, uniqueName, type TestService } from 'rpc-service/testing';
import type { AuthRpcSignupResult } from '../../clients/typescript/src/operations.ts';
import { callerIn, type Caller, type Who } from './caller.ts';
import type { Envelope } from './wire.ts';
import { createScratchDatabase, directUrlOf, TEST_DATABASE_URL, type ScratchDatabase } from './database.ts';

export { uniqueName, TEST_MASTER_KEY, type CallOptions, type RpcResponse } from 'rpc-service/testing';

export const NOTES_PLUGIN = fileURLToPath(new URL('../fixtures/notes-plugin', import.meta.url));

export interface StartOptions {
  /** Extra environment, as a user would set it. */
  env?: Record<string, string>;
  /** Reuse a data folder (restart tests); a fresh temporary one otherwise. */
  dataDir?: string;
  /** Share one PostgreSQL database between instances; a scratch one otherwise (with TEST_DATABASE_URL). */
  databaseUrl?: string;
  /** Keep the embedded database on disk under dataDir instead of in memory. */
  persistent?: boolean;
  extraPlugins?: Plugin[];
  /** Load the example notes plugin through PLUGINS (default true). */
  withNotes?: boolean;
  /** Start only these plugins and the ones they need: a backend for the plugins under test. */
  plugins?: string[];
  /** The address to listen on (default 127.0.0.1). */
  host?: string;
}

/** A user signed up with a team of their own: the session, as AuthRpc.signup answers it, and the password. */
export type Session = AuthRpcSignupResult & { password: string };

export interface TestApp extends Omit<TestService, 'signup'> {
  /**
   * Operations called in the process, typed, as `who`: a session or API key
   * (authenticated at each call, as over HTTP), a principal, or anonymously
   * (null). For unit-level checks; what a client sees on the wire goes
   * through `call`, `ok` and the doors' own tests.
   */
  as(who: Who): Caller;
  /** Signs up a new user with a team of their own (an admin of it). */
  signup(name?: string, password?: string): Promise<Session>;
}

/** The service as rpc-service/testing starts it, on a scratch PostgreSQL database when TEST_DATABASE_URL is set, with the example plugin. */
export async function startTestApp(options: StartOptions = {}): Promise<TestApp> {
  let scratch: ScratchDatabase | undefined;
  let databaseUrl = options.databaseUrl;
  if (!databaseUrl && TEST_DATABASE_URL) {
    scratch = await createScratchDatabase(TEST_DATABASE_URL);
    databaseUrl = scratch.url;
  }
  const service = await startTestService({
    env: {
      LOG_LEVEL: 'debug',
      // Test files sign up many users from one address; the limit's own tests set it lower.
      SIGNUP_IP_LIMIT: '100000',
      PLUGINS: options.withNotes === false ? '' : NOTES_PLUGIN,
      // Through a pooler, what needs a session goes to the server itself.
      ...(databaseUrl && directUrlOf(databaseUrl) ? { DATABASE_DIRECT_URL: directUrlOf(databaseUrl)! } : {}),
      ...options.env,
    },
    dataDir: options.dataDir,
    databaseUrl,
    persistent: options.persistent,
    plugins: options.extraPlugins,
    only: options.plugins,
    host: options.host,
    onClose: scratch ? () => scratch.drop() : undefined,
  });
  // Links in answers (upload URLs) name PUBLIC_URL, else the address the test's requests go to, as over HTTP.
  const as = (who: Who) => callerIn(service.app, who, { baseUrl: service.app.config.publicUrl ?? service.url });
  return {
    ...service,
    as,
    async signup(name = uniqueName(), password = 'correct horse battery') {
      return { ...(await as(null).AuthRpc.signup({ email: `${name}@example.com`, username: name, password })), password };
    },
  };
}

/** A request to a route outside /api/rpc, with a session token when given: its status and JSON body. */
export async function routeJson<T = unknown>(t: TestApp, method: string, path: string, token?: string): Promise<{ status: number; body: Envelope<T> }> {
  const response = await fetch(`${t.url}${path}`, { method, headers: token ? { authorization: `Bearer ${token}` } : {} });
  return { status: response.status, body: (await response.json()) as Envelope<T> };
}
