/**
 * `rpc-service/testing`: the whole service in the test's own process, with
 * the plugins under test, listening on a free port of 127.0.0.1. A plugin's
 * tests call it over HTTP as its users will; the repository's own test
 * harness (test/support/harness.ts) is built on it.
 */
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { Writable } from 'node:stream';
import { createApp, type App } from '../app/app.ts';
import { loadConfig } from '../base/config.ts';
import type { Plugin } from '../plugin/define.ts';

export interface TestServiceOptions {
  /** Plugins given as objects, loaded after the built-in ones and those named in PLUGINS. */
  plugins?: Plugin[];
  /** Settings, as the environment would give them; nothing is read from `process.env`. */
  env?: Record<string, string>;
  /** Start only the plugins with these ids and those they need (faster; by default every plugin starts). */
  only?: readonly string[];
  /** A PostgreSQL database to use (it needs pgvector); the embedded database otherwise. */
  databaseUrl?: string;
  /** The data folder; a new temporary one, removed by `close`, otherwise. */
  dataDir?: string;
  /** Keep the embedded database on disk under the data folder instead of in memory. */
  persistent?: boolean;
  /** The address to listen on (default 127.0.0.1). */
  host?: string;
  /** Runs after the service has closed (say, to drop a scratch database). */
  onClose?: () => Promise<void>;
}

export interface CallOptions {
  apiKey?: string;
  /** A session token, sent as `Authorization: Bearer`. */
  token?: string;
  headers?: Record<string, string>;
}

export interface RpcResponse<T = any> {
  status: number;
  headers: Headers;
  /** The spec's envelope `{success, data}`; on an error, data is `{error, code, issues?}`. */
  body: { success: boolean; data: T; message?: string } & Record<string, any>;
}

export interface TestService {
  app: App;
  /** The base address, e.g. `http://127.0.0.1:40123`. */
  url: string;
  dataDir: string;
  databaseUrl?: string;
  /** Every log line the service wrote. */
  logs: string[];
  /** `POST /api/rpc` with `{method, params}`: the status, headers and envelope. */
  call<T = any>(method: string, params?: unknown, options?: CallOptions): Promise<RpcResponse<T>>;
  /** Calls and insists on success; returns the envelope's data. */
  ok<T = any>(method: string, params?: unknown, options?: CallOptions): Promise<T>;
  /** Signs up a new user with a team of their own (an admin of it). */
  signup(name?: string, password?: string): Promise<{ token: string; user: any; subscriptionId: string; password: string }>;
  /** Stops the service and removes what it made. */
  close(): Promise<void>;
}

/** A fixed master key for runs on PostgreSQL, where the service needs one given (the embedded database makes its own). */
export const TEST_MASTER_KEY = Buffer.alloc(32, 7).toString('base64');

let counter = 0;
/** A name no other test in any process uses, for usernames and the like. */
export const uniqueName = (base = 'user') => `${base}${process.pid}x${++counter}x${randomBytes(3).toString('hex')}`;

export async function startTestService(options: TestServiceOptions = {}): Promise<TestService> {
  const ownsDataDir = !options.dataDir;
  const dataDir = options.dataDir ?? mkdtempSync(path.join(tmpdir(), 'rpc-test-'));
  const { databaseUrl } = options;
  const env: Record<string, string> = {
    DATA_DIR: dataDir,
    WORKERS: '1',
    // Every answer checked against its operation's declared result: a mismatch fails the call that shows it.
    CHECK_RESULTS: 'true',
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
  const cleanUp = async () => {
    await options.onClose?.();
    if (ownsDataDir) rmSync(dataDir, { recursive: true, force: true });
  };
  let app: App;
  try {
    app = await createApp({
      config: loadConfig(env),
      logStream,
      inMemoryDatabase: !databaseUrl && !options.persistent,
      extraPlugins: options.plugins,
      only: options.only,
    });
  } catch (error) {
    await cleanUp();
    throw error;
  }
  let url: string;
  try {
    url = await app.listen(0, options.host ?? '127.0.0.1');
  } catch (error) {
    await app.close();
    await cleanUp();
    throw error;
  }

  const call = async <T>(method: string, params: unknown = {}, callOptions: CallOptions = {}): Promise<RpcResponse<T>> => {
    const headers: Record<string, string> = { 'content-type': 'application/json', ...callOptions.headers };
    if (callOptions.apiKey) headers['x-api-key'] = callOptions.apiKey;
    if (callOptions.token) headers.authorization = `Bearer ${callOptions.token}`;
    const response = await fetch(`${url}/api/rpc`, { method: 'POST', headers, body: JSON.stringify({ method, params }) });
    return { status: response.status, headers: response.headers, body: (await response.json()) as RpcResponse<T>['body'] };
  };

  const service: TestService = {
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
      const data = await service.ok('AuthRpc.signup', { email: `${name}@example.com`, username: name, password });
      return { ...data, password };
    },
    async close() {
      await app.close();
      await cleanUp();
    },
  };
  return service;
}
