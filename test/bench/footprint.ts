import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { START_ARGS } from '../support/process.ts';

/**
 * `npm run bench` (second part): the service on the embedded database as
 * `npm start` starts it, on a new DATA_DIR and again on the data it left: time
 * until /health answers, and resident memory 5 s later and once settled (V8
 * gives memory back after some idle time). The baseline, measured in the same
 * run, is a bare node:http process under the same loader.
 */
const ROOT = fileURLToPath(new URL('../..', import.meta.url));
const BARE_SERVER = `require('node:http').createServer((req, res) => res.end('ok')).listen(Number(process.env.PORT), '127.0.0.1')`;
const SETTLED_MS = Number(process.env.BENCH_SETTLED_MS ?? 60_000);
const JUST_STARTED_MS = 5000;
const NODE_ARGS = START_ARGS.slice(0, START_ARGS.indexOf('core/main.ts'));

const freePort = () =>
  new Promise<number>((resolve) => {
    const probe = createServer().listen(0, '127.0.0.1', () => {
      const { port } = probe.address() as { port: number };
      probe.close(() => resolve(port));
    });
  });

const rssMb = (pid: number) => Number(/VmRSS:\s+(\d+)/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))![1]) / 1024;

interface Run {
  startMs: number;
  startedRssMb: number;
  settledRssMb: number;
}

/** Starts, waits for /health, then (when `watch`) reads RSS 5 s later and once settled. */
async function measure(args: string[], env: Record<string, string>, watch = true): Promise<Run> {
  const port = await freePort();
  const started = performance.now();
  const child: ChildProcess = spawn(process.execPath, [...NODE_ARGS, ...args], {
    cwd: ROOT,
    env: { ...process.env, ...env, PORT: String(port), LOG_LEVEL: 'warn' },
    stdio: ['ignore', 'ignore', 'inherit'],
  });
  try {
    for (;;) {
      if (child.exitCode !== null) throw new Error(`${args.join(' ')} exited with ${child.exitCode}`);
      const ok = await fetch(`http://127.0.0.1:${port}/health`).then((response) => response.ok, () => false);
      if (ok) break;
      await new Promise((resolve) => setTimeout(resolve, 20));
    }
    const startMs = performance.now() - started;
    if (!watch) return { startMs, startedRssMb: Number.NaN, settledRssMb: Number.NaN };
    await new Promise((resolve) => setTimeout(resolve, JUST_STARTED_MS));
    const startedRssMb = rssMb(child.pid!);
    await new Promise((resolve) => setTimeout(resolve, Math.max(0, SETTLED_MS - JUST_STARTED_MS)));
    return { startMs, startedRssMb, settledRssMb: rssMb(child.pid!) };
  } finally {
    const exited = new Promise((resolve) => child.once('exit', resolve));
    child.kill('SIGTERM');
    await exited;
  }
}

const dataDir = mkdtempSync(path.join(tmpdir(), 'rpc-bench-footprint-'));
try {
  const bare = await measure(['-e', BARE_SERVER], {});
  const fresh = await measure(['core/main.ts'], { DATA_DIR: dataDir });
  // Start-up on existing data varies the most from run to run: the median of three starts.
  const starts = [await measure(['core/main.ts'], { DATA_DIR: dataDir }, false), await measure(['core/main.ts'], { DATA_DIR: dataDir }, false)];
  const watched = await measure(['core/main.ts'], { DATA_DIR: dataDir });
  const existing = { ...watched, startMs: [...starts, watched].map((run) => run.startMs).sort((a, b) => a - b)[1]! };
  const mb = (value: number) => `${value.toFixed(0).padStart(4)} MB`;
  const row = (label: string, run: Run) =>
    console.log(`${label.padEnd(34)} start ${(run.startMs / 1000).toFixed(2).padStart(6)} s   RSS ${mb(run.startedRssMb)} after 5 s, ${mb(run.settledRssMb)} after ${SETTLED_MS / 1000} s`);
  console.log(`\nfootprint (embedded database; node ${NODE_ARGS.join(' ')})`);
  row('bare node:http under tsx', bare);
  row('service, new DATA_DIR', fresh);
  row('service, existing DATA_DIR (3)', existing);
  console.log(
    `settled RSS over the bare process: ${(existing.settledRssMb - bare.settledRssMb).toFixed(0)} MB (existing data), ${(fresh.settledRssMb - bare.settledRssMb).toFixed(0)} MB (new)`,
  );
} finally {
  rmSync(dataDir, { recursive: true, force: true });
}
