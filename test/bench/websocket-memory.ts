import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import WebSocket from 'ws';
import { createApp } from '../../core/app/app.ts';
import { loadConfig } from '../../core/base/config.ts';

/**
 * `node --expose-gc --import tsx test/bench/websocket-memory.ts`: the memory
 * one idle WebSocket costs the server. This process runs the service (the
 * embedded database) and a child process opens SOCKETS sockets of one user
 * and holds them; the server's resident memory and V8 heap (after a full
 * collection) are compared before and after, each read once idle for a while.
 */
const SOCKETS = Number(process.env.BENCH_SOCKETS ?? 1000);
const SETTLE_MS = Number(process.env.BENCH_SETTLE_MS ?? 5000);
const SELF = fileURLToPath(import.meta.url);

/** The child: opens the sockets, says so on stdout, and holds them until its stdin closes. */
async function holdSockets(url: string, token: string): Promise<void> {
  const sockets: WebSocket[] = [];
  for (let opened = 0; opened < SOCKETS; opened += 50) {
    await Promise.all(
      Array.from({ length: Math.min(50, SOCKETS - opened) }, () => {
        const ws = new WebSocket(url, { headers: { authorization: `Bearer ${token}` } });
        sockets.push(ws);
        return new Promise<void>((resolve, reject) => {
          ws.once('message', () => resolve());
          ws.once('error', reject);
        });
      }),
    );
  }
  process.stdout.write('opened\n');
  process.stdin.resume();
  process.stdin.once('end', () => process.exit(0));
}

async function measure(): Promise<{ rss: number; heap: number }> {
  await new Promise((resolve) => setTimeout(resolve, SETTLE_MS));
  const gc = (globalThis as { gc?: () => void }).gc;
  if (!gc) throw new Error('run with node --expose-gc');
  gc();
  const { rss, heapUsed } = process.memoryUsage();
  return { rss, heap: heapUsed };
}

async function main(): Promise<void> {
  const dataDir = mkdtempSync(path.join(tmpdir(), 'ws-memory-'));
  const env = { DATA_DIR: dataDir, LOG_LEVEL: 'warn', WORKERS: '1', WS_MAX_PER_USER: String(SOCKETS), WS_MAX_PER_ADDRESS: String(SOCKETS) };
  const app = await createApp({ config: loadConfig(env) });
  try {
    const url = await app.listen(0, '127.0.0.1');
    const signup = await fetch(`${url}/api/rpc`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ method: 'AuthRpc.signup', params: { email: 'bench@example.com', username: 'bench', password: 'correct horse battery' } }),
    });
    const { token } = (await signup.json()).data;
    const before = await measure();
    const child = spawn(process.execPath, ['--import', 'tsx', SELF, `${url.replace(/^http/, 'ws')}/ws`, token], { stdio: ['pipe', 'pipe', 'inherit'] });
    await new Promise<void>((resolve, reject) => {
      child.stdout.on('data', (chunk) => String(chunk).includes('opened') && resolve());
      child.once('exit', (code) => reject(new Error(`the client exited with ${code}`)));
    });
    const after = await measure();
    const each = (bytes: number) => `${(bytes / SOCKETS / 1024).toFixed(1)} KiB each`;
    console.log(
      `${SOCKETS} idle WebSockets: RSS +${((after.rss - before.rss) / 2 ** 20).toFixed(1)} MiB (${each(after.rss - before.rss)}), ` +
        `V8 heap +${((after.heap - before.heap) / 2 ** 20).toFixed(1)} MiB (${each(after.heap - before.heap)})`,
    );
    child.stdin.end();
    await new Promise((resolve) => child.once('exit', resolve));
  } finally {
    await app.close();
    rmSync(dataDir, { recursive: true, force: true });
  }
}

if (process.argv[2]) await holdSockets(process.argv[2], process.argv[3]!);
else await main();
