import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { Writable } from 'node:stream';
import { fileURLToPath } from 'node:url';
import type { Plugin } from 'rpc-service/plugin';
import { createApp, type App } from '../../core/app.ts';
import { loadConfig } from '../../core/config.ts';
import { createScratchDatabase, TEST_DATABASE_URL, type ScratchDatabase } from './database.ts';

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

export interface CallOptions {
  apiKey?: string;
  token?: string;
  headers?: Record<string, string>;
}

export interface RpcResponse<T = any> {
  status: number;
  headers: Headers;
  body: { success: boolean; data: T; message?: string } & Record<string, any>;
}

export interface TestApp {
  app: App;
  url: string;
  dataDir: string;
  databaseUrl?: string;
  /** Every log line the app wrote. */
  logs: string[];
  call<T = any>(method: string, params?: unknown, options?: CallOptions): Promise<RpcResponse<T>>;
  /** Calls and insists on success; returns data. */
  ok<T = any>(method: string, params?: unknown, options?: CallOptions): Promise<T>;
  signup(name?: string, password?: string): Promise<{ token: string; user: any; subscriptionId: string; password: string }>;
  close(): Promise<void>;
}

let counter = 0;
export const uniqueName = (base = 'user') => `${base}${process.pid}x${++counter}x${randomBytes(3).toString('hex')}`;

export async function startTestApp(options: StartOptions = {}): Promise<TestApp> {
  const ownsDataDir = !options.dataDir;
  const dataDir = options.dataDir ?? mkdtempSync(path.join(tmpdir(), 'rpc-test-'));
  let scratch: ScratchDatabase | undefined;
  let databaseUrl = options.databaseUrl;
  if (!databaseUrl && TEST_DATABASE_URL) {
    scratch = await createScratchDatabase(TEST_DATABASE_URL);
    databaseUrl = scratch.url;
  }
  const env: Record<string, string> = {
    DATA_DIR: dataDir,
    LOG_LEVEL: 'debug',
    WORKERS: '1',
    // Test files sign up many users from one address; the limit's own tests set it lower.
    SIGNUP_IP_LIMIT: '100000',
    PLUGINS: options.withNotes === false ? '' : NOTES_PLUGIN,
    ...(databaseUrl ? { DATABASE_URL: databaseUrl, MASTER_KEY: TEST_MASTER_KEY } : {}),
    ...options.env,
  };
  const logs: string[] = [];
  const logStream = new Writable({
    write(chunk, _encoding, done) {
      logs.push(...chunk.toString().split('\n').filter(Boolean));
      done();
    },
  });
  let app: App;
  try {
    app = await createApp({
      config: loadConfig(env),
      logStream,
      inMemoryDatabase: !databaseUrl && !options.persistent,
      extraPlugins: options.extraPlugins,
      only: options.plugins,
    });
  } catch (error) {
    await scratch?.drop();
    if (ownsDataDir) rmSync(dataDir, { recursive: true, force: true });
    throw error;
  }
  const url = await app.listen(0, options.host ?? '127.0.0.1');

  const call = async <T>(method: string, params: unknown = {}, callOptions: CallOptions = {}): Promise<RpcResponse<T>> => {
    const headers: Record<string, string> = { 'content-type': 'application/json', ...callOptions.headers };
    if (callOptions.apiKey) headers['x-api-key'] = callOptions.apiKey;
    if (callOptions.token) headers.authorization = `Bearer ${callOptions.token}`;
    const response = await fetch(`${url}/api/rpc`, { method: 'POST', headers, body: JSON.stringify({ method, params }) });
    return { status: response.status, headers: response.headers, body: await response.json() };
  };

  const testApp: TestApp = {
    app,
    url,
    dataDir,
    databaseUrl,
    logs,
    call,
    async ok<T>(method: string, params?: unknown, callOptions?: CallOptions): Promise<T> {
      const response = await call<T>(method, params, callOptions);
      if (response.status !== 200 || !response.body.success) {
        throw new Error(`${method} failed with ${response.status}: ${JSON.stringify(response.body)}`);
      }
      return response.body.data;
    },
    async signup(name = uniqueName(), password = 'correct horse battery') {
      const data = await testApp.ok('AuthRpc.signup', { email: `${name}@example.com`, username: name, password });
      return { ...data, password };
    },
    async close() {
      await app.close();
      await scratch?.drop();
      if (ownsDataDir) rmSync(dataDir, { recursive: true, force: true });
    },
  };
  return testApp;
}

/** A fixed master key for PostgreSQL test runs (embedded runs generate their own). */
/** A request to a route outside /api/rpc, with a session token when given: its status and JSON body. */
export async function routeJson(t: TestApp, method: string, path: string, token?: string): Promise<{ status: number; body: any }> {
  const response = await fetch(`${t.url}${path}`, { method, headers: token ? { authorization: `Bearer ${token}` } : {} });
  return { status: response.status, body: await response.json() };
}

export const TEST_MASTER_KEY = Buffer.alloc(32, 7).toString('base64');
