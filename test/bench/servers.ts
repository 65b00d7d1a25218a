import { createServer, type IncomingMessage } from 'node:http';
import type { AddressInfo } from 'node:net';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import type { PGlite } from '@electric-sql/pglite';
import Router from '@koa/router';
import Koa from 'koa';
import pg from 'pg';
import { createApp } from '../../core/app/app.ts';
import { loadConfig } from '../../core/base/config.ts';
import { LIST_KEYS, toApiKeyRecord } from '../../plugins/api-key/api-key.service.ts';
import { NOTES_PLUGIN, TEST_MASTER_KEY } from '../support/harness.ts';
import { dataOf, type Envelope, type ResultOf } from '../support/wire.ts';

/**
 * One benchmark target per process: `rpc` (the service), `node` (bare
 * node:http), `koa` (stock Koa + @koa/router), `pg` (bare node:http reading
 * the API keys through a pg.Pool) or `sink` (an OTLP/HTTP collector that
 * reads each export and drops it). Prints `READY <url>`, and for `rpc` also
 * the API key, the bare server inside the same process, the key owner's
 * subscription and user ids, and (on PGlite) the in-process direct reader.
 */

// What the service answers for NoteRpc.whoAmI, so the baselines send the same bytes.
const SAME_JSON = JSON.stringify({
  success: true,
  data: {
    subscriptionId: '4d6f7a0e-3b1c-4c59-9d3e-5a7c1b2e8f90',
    userId: '7b1e2c3d-4f5a-4b6c-8d7e-9f0a1b2c3d4e',
    role: 'admin',
    apiKeyId: '0a1b2c3d-4e5f-4a6b-8c7d-8e9f0a1b2c3d',
    projectId: null,
    extra: {},
  },
});

// getData's own SQL.
const API_KEYS_SQL = LIST_KEYS.sql;

type Row = Parameters<typeof toApiKeyRecord>[0];

/** The plain stream way to read a small body, as a minimal server would. */
function readAll(req: IncomingMessage): Promise<string> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    req.on('data', (chunk: Buffer) => chunks.push(chunk));
    req.on('end', () => resolve(Buffer.concat(chunks).toString('utf8')));
    req.on('error', reject);
  });
}

async function listen(server: ReturnType<typeof createServer>): Promise<string> {
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
}

async function bareNode(): Promise<string> {
  const server = createServer(async (req, res) => {
    JSON.parse(await readAll(req));
    res.writeHead(200, { 'content-type': 'application/json; charset=utf-8', 'content-length': Buffer.byteLength(SAME_JSON) });
    res.end(SAME_JSON);
  });
  return `${await listen(server)}/api/rpc`;
}

/** Bare node:http answering what ApiKeyRpc.getData answers, from the same SQL and mapping run by `query`: (b) without the ORM and RPC layers. */
async function directReader(query: (sql: string, params: string[]) => Promise<Row[]>, subscriptionId: string, userId: string): Promise<string> {
  const server = createServer(async (req, res) => {
    JSON.parse(await readAll(req));
    const data = (await query(API_KEYS_SQL, [subscriptionId, userId])).map((row) => toApiKeyRecord(row));
    const text = JSON.stringify({ success: true, data: { data, totalCount: data.length } });
    res.writeHead(200, { 'content-type': 'application/json; charset=utf-8', 'content-length': Buffer.byteLength(text) });
    res.end(text);
  });
  return `${await listen(server)}/api/rpc`;
}

/** Takes OTLP/HTTP exports at any path and answers 200, as a collector does, keeping nothing. */
async function otlpSink(): Promise<string> {
  const server = createServer(async (req, res) => {
    await readAll(req);
    res.writeHead(200, { 'content-type': 'application/json' }).end('{}');
  });
  return listen(server);
}

async function stockKoa(): Promise<string> {
  const app = new Koa();
  const router = new Router();
  router.post('/api/rpc', async (ctx) => {
    JSON.parse(await readAll(ctx.req));
    ctx.body = SAME_JSON;
    ctx.type = 'application/json';
  });
  app.use(router.routes()).use(router.allowedMethods());
  return `${await listen(createServer(app.callback()))}/api/rpc`;
}

async function service(databaseUrl: string | undefined) {
  const config = loadConfig({
    ...process.env,
    DATA_DIR: mkdtempSync(path.join(tmpdir(), 'rpc-bench-')),
    PLUGINS: NOTES_PLUGIN,
    LOG_LEVEL: process.env.LOG_LEVEL ?? 'info',
    DATABASE_URL: databaseUrl,
    MASTER_KEY: databaseUrl ? TEST_MASTER_KEY : undefined,
  });
  const app = await createApp({ config, inMemoryDatabase: !databaseUrl });
  const url = await app.listen(0, '127.0.0.1');
  const call = async <M extends string>(method: M, params: unknown, headers: Record<string, string> = {}): Promise<ResultOf<M>> => {
    const response = await fetch(`${url}/api/rpc`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', ...headers },
      body: JSON.stringify({ method, params }),
    });
    return dataOf((await response.json()) as Envelope) as ResultOf<M>;
  };
  const name = `bench${Date.now()}`;
  const { token, user, subscriptionId } = await call('AuthRpc.signup', { email: `${name}@example.com`, username: name, password: 'bench password' });
  const keys = [];
  for (const description of ['ci', 'agent', 'reporting']) {
    keys.push(await call('ApiKeyRpc.create', { description }, { authorization: `Bearer ${token}` }));
  }
  // What (g) reads: a secret's value, decrypted and audited on every call.
  await call('SecretsRpc.create', { zone: 'bench', key: 'TOKEN', value: 'bench secret value' }, { authorization: `Bearer ${token}` });
  return { app, url: `${url}/api/rpc`, apiKey: keys[0]!.fullKey, subscriptionId, userId: user._id };
}

// Exit normally on SIGTERM, so `node --cpu-prof` can write its profile.
process.on('SIGTERM', () => process.exit(0));
const [kind, databaseUrl, subscriptionId, userId] = process.argv.slice(2);
if (kind === 'rpc') {
  const target = await service(databaseUrl);
  // The same bare server inside the service's process: what the process itself (database driver, ORM) costs.
  const inProcess = await bareNode();
  // PGlite lives inside the service's process and takes one connection, so the
  // direct reader runs there too, on the same instance, with PGlite's own
  // query(sql, params) as a hand-written server would call it (the service's
  // driver sends the same statement with its values inlined, through the
  // cheaper simple protocol; see core/db/orm.ts). On PostgreSQL it is process `pg`.
  let direct = '';
  if (!databaseUrl) {
    const driverOptions = target.app.deps.db.orm.config.get('driverOptions') as { connection: { pglite(): PGlite } };
    const pglite = driverOptions.connection.pglite();
    direct = await directReader(async (sql, params) => (await pglite.query<Row>(sql, params)).rows, target.subscriptionId, target.userId);
  }
  console.log(`READY ${target.url} ${target.apiKey} ${inProcess} ${target.subscriptionId} ${target.userId} ${direct}`);
} else if (kind === 'pg') {
  // As many connections as the service's pool (core/db/orm.ts), so both wait on PostgreSQL alike.
  const pool = new pg.Pool({ connectionString: databaseUrl, max: 10 });
  console.log(`READY ${await directReader(async (sql, params) => (await pool.query<Row>(sql, params)).rows, subscriptionId!, userId!)}`);
} else if (kind === 'sink') {
  console.log(`READY ${await otlpSink()}`);
} else {
  console.log(`READY ${kind === 'koa' ? await stockKoa() : await bareNode()}`);
}
