import { createServer, type IncomingMessage } from 'node:http';
import type { AddressInfo } from 'node:net';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import Router from '@koa/router';
import Koa from 'koa';
import { createApp } from '../../core/app.ts';
import { loadConfig } from '../../core/config.ts';
import { NOTES_PLUGIN } from '../support/harness.ts';

/**
 * One benchmark target per process: `rpc` (the service), `node` (bare
 * node:http) or `koa` (stock Koa + @koa/router). Prints `READY <url> [<apiKey> <bare url in the same process>]`.
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

async function service(): Promise<{ url: string; apiKey: string }> {
  const config = loadConfig({
    ...process.env,
    DATA_DIR: mkdtempSync(path.join(tmpdir(), 'rpc-bench-')),
    PLUGINS: NOTES_PLUGIN,
    LOG_LEVEL: process.env.LOG_LEVEL ?? 'info',
    DATABASE_URL: process.env.BENCH_DATABASE_URL,
    MASTER_KEY: process.env.BENCH_DATABASE_URL ? Buffer.alloc(32, 3).toString('base64') : undefined,
  });
  const app = await createApp({ config, inMemoryDatabase: !config.databaseUrl });
  const url = await app.listen(0, '127.0.0.1');
  const call = async (method: string, params: unknown, headers: Record<string, string> = {}) => {
    const response = await fetch(`${url}/api/rpc`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', ...headers },
      body: JSON.stringify({ method, params }),
    });
    return ((await response.json()) as { data: any }).data;
  };
  const name = `bench${Date.now()}`;
  const { token } = await call('AuthRpc.signup', { email: `${name}@example.com`, username: name, password: 'bench password' });
  const keys = [];
  for (const description of ['ci', 'agent', 'reporting']) {
    keys.push(await call('ApiKeyRpc.create', { description }, { authorization: `Bearer ${token}` }));
  }
  return { url: `${url}/api/rpc`, apiKey: keys[0].fullKey };
}

// Exit normally on SIGTERM, so `node --cpu-prof` can write its profile.
process.on('SIGTERM', () => process.exit(0));
const kind = process.argv[2];
if (kind === 'rpc') {
  const target = await service();
  // The same bare server inside the service's process: what the process itself (database driver, ORM) costs.
  console.log(`READY ${target.url} ${target.apiKey} ${await bareNode()}`);
} else {
  console.log(`READY ${kind === 'koa' ? await stockKoa() : await bareNode()}`);
}
