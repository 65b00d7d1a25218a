import { spawn, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { Pool } from 'undici';
import { createScratchDatabase } from '../support/database.ts';
import { START_ARGS } from '../support/process.ts';
import { supportedRuntimes, type Runtime } from '../support/runtimes.ts';
import type { Envelope, ResultOf } from '../support/wire.ts';

/**
 * `npm run bench` (second part): the service on the embedded database as
 * `npm start` starts it, on a new DATA_DIR and again on the data it left: time
 * until /health answers, and resident memory 5 s later and once settled (V8
 * gives memory back after some idle time), then under load. The baseline,
 * measured in the same run, is a bare node:http process started with the same
 * node flags. All of it on each supported Node.js major (BENCH_MAJORS=24,20
 * picks), the others installed by .ci/ensure-node.sh; a table of the aims per
 * major ends the run.
 */
const ROOT = fileURLToPath(new URL('../..', import.meta.url));
const BARE_SERVER = `require('node:http').createServer((req, res) => res.end('ok')).listen(Number(process.env.PORT), '127.0.0.1')`;
const SETTLED_MS = Number(process.env.BENCH_SETTLED_MS ?? 60_000);
const JUST_STARTED_MS = 5000;
/** What `npm start` runs (built by `npm run build`, which `npm run bench` runs first). */
const ENTRY = START_ARGS.at(-1)!;
const NODE_ARGS = START_ARGS.slice(0, -1);
const LOAD_RUNS = Number(process.env.BENCH_LOAD_RUNS ?? 3);
const LOAD_CLIENTS = Number(process.env.BENCH_LOAD_CLIENTS ?? 20);
const LOAD_SECONDS = Number(process.env.BENCH_LOAD_SECONDS ?? 20);
const BASE_DATABASE_URL = process.env.BENCH_DATABASE_URL || undefined;
const RUNTIMES = supportedRuntimes(process.env.BENCH_MAJORS);
/** The node binary of the major being measured. */
let node = process.execPath;

const freePort = () =>
  new Promise<number>((resolve) => {
    const probe = createServer().listen(0, '127.0.0.1', () => {
      const { port } = probe.address() as { port: number };
      probe.close(() => resolve(port));
    });
  });

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

const mb = (value: number) => `${value.toFixed(0).padStart(4)} MB`;

const rssMb = (pid: number) => Number(/VmRSS:\s+(\d+)/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))![1]) / 1024;

interface Run {
  startMs: number;
  startedRssMb: number;
  settledRssMb: number;
}

interface Started {
  child: ChildProcess;
  port: number;
  startMs: number;
}

/** Starts node with `args` as `npm start` would and waits until /health answers. */
async function start(args: string[], env: Record<string, string>): Promise<Started> {
  const port = await freePort();
  const started = performance.now();
  const child: ChildProcess = spawn(node, [...NODE_ARGS, ...args], {
    cwd: ROOT,
    env: { ...process.env, ...env, PORT: String(port), LOG_LEVEL: 'warn' },
    stdio: ['ignore', 'ignore', 'inherit'],
  });
  try {
    for (;;) {
      if (child.exitCode !== null) throw new Error(`${args.join(' ')} exited with ${child.exitCode}`);
      const ok = await fetch(`http://127.0.0.1:${port}/health`).then(
        (response) => response.ok,
        () => false,
      );
      if (ok) return { child, port, startMs: performance.now() - started };
      await sleep(20);
    }
  } catch (error) {
    await stop(child);
    throw error;
  }
}

async function stop(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null) return;
  const exited = new Promise((resolve) => child.once('exit', resolve));
  child.kill('SIGTERM');
  await exited;
}

/** Starts, waits for /health, then (when `watch`) reads RSS 5 s later and once settled. */
async function measure(args: string[], env: Record<string, string>, watch = true): Promise<Run> {
  const { child, startMs } = await start(args, env);
  try {
    if (!watch) return { startMs, startedRssMb: Number.NaN, settledRssMb: Number.NaN };
    await sleep(JUST_STARTED_MS);
    const startedRssMb = rssMb(child.pid!);
    await sleep(Math.max(0, SETTLED_MS - JUST_STARTED_MS));
    return { startMs, startedRssMb, settledRssMb: rssMb(child.pid!) };
  } finally {
    await stop(child);
  }
}

interface LoadRun {
  requestsPerSecond: number;
  rssAfterMb: number;
  settledRssMb: number;
}

interface Load {
  idleRssMb: number;
  runs: LoadRun[];
}

/**
 * One process, settled, then LOAD_RUNS load runs: each LOAD_CLIENTS clients
 * calling in turn a session read, a list of API keys, a new secret, an audited
 * secret read, a new memory, a recall and a list of secrets, for LOAD_SECONDS.
 */
async function underLoad(env: Record<string, string>): Promise<Load> {
  const { child, port } = await start([ENTRY], env);
  const pool = new Pool(`http://127.0.0.1:${port}`, { connections: LOAD_CLIENTS });
  const call = async <M extends string>(method: M, params: object, headers: Record<string, string>): Promise<ResultOf<M>> => {
    const { body } = await pool.request({
      path: '/api/rpc',
      method: 'POST',
      headers: { 'content-type': 'application/json', ...headers },
      body: JSON.stringify({ method, params }),
    });
    const reply = (await body.json()) as Envelope;
    if (!reply.success) throw new Error(`${method}: ${reply.data.code} ${reply.data.error}`);
    return reply.data as ResultOf<M>;
  };
  try {
    const name = `load${Date.now()}`;
    const { token } = await call('AuthRpc.signup', { email: `${name}@example.com`, username: name, password: 'bench password' }, {});
    const { fullKey } = await call('ApiKeyRpc.create', { description: 'load' }, { authorization: `Bearer ${token}` });
    const auth = { 'x-api-key': fullKey };
    await call('SecretsRpc.create', { zone: 'load', key: 'TOKEN', value: 'bench secret value' }, auth);
    const words = ['invoice', 'meeting', 'customer', 'release', 'budget', 'travel', 'contract', 'support', 'roadmap', 'hiring'];
    const word = (n: number) => words[n % words.length]!;
    let sequence = 0;
    const mix: Array<(n: number) => [string, object]> = [
      () => ['AuthRpc.getSession', {}],
      () => ['ApiKeyRpc.getData', {}],
      (n) => ['SecretsRpc.create', { zone: 'load', key: `K${n}`, value: `value ${n}` }],
      () => ['SecretsRpc.getSecretValue', { zone: 'load', key: 'TOKEN' }],
      (n) => ['MemoryRpc.saveMemory', { scope: 'user', memory: { content: `note ${n} on the ${word(n)} and the ${word(n * 7 + 3)}`, metadata: { n } } }],
      (n) => ['MemoryRpc.recallMemories', { scope: 'user', queryText: `${word(n)} ${word(n * 3 + 1)}`, topK: 3 }],
      () => ['SecretsRpc.getData', { page: 1, pageSize: 25 }],
    ];
    await sleep(SETTLED_MS);
    const idleRssMb = rssMb(child.pid!);
    const runs: LoadRun[] = [];
    for (let run = 0; run < LOAD_RUNS; run++) {
      const until = performance.now() + LOAD_SECONDS * 1000;
      let calls = 0;
      await Promise.all(
        Array.from({ length: LOAD_CLIENTS }, async (_, client) => {
          for (let turn = client; performance.now() < until; turn++) {
            const n = sequence++;
            await call(...mix[turn % mix.length]!(n), auth);
            calls++;
          }
        }),
      );
      const rssAfterMb = rssMb(child.pid!);
      await sleep(SETTLED_MS);
      runs.push({ requestsPerSecond: calls / LOAD_SECONDS, rssAfterMb, settledRssMb: rssMb(child.pid!) });
    }
    return { idleRssMb, runs };
  } finally {
    await pool.close();
    await stop(child);
  }
}

interface Figures {
  runtime: Runtime;
  bare: Run;
  existing: Run;
  load: Load;
}

const figures: Figures[] = [];
for (const runtime of RUNTIMES) {
  node = runtime.node;
  const dataDir = mkdtempSync(path.join(tmpdir(), 'rpc-bench-footprint-'));
  try {
    const bare = await measure(['-e', BARE_SERVER], {});
    const fresh = await measure([ENTRY], { DATA_DIR: dataDir });
    // Start-up on existing data varies the most from run to run: the median of three starts.
    const starts = [await measure([ENTRY], { DATA_DIR: dataDir }, false), await measure([ENTRY], { DATA_DIR: dataDir }, false)];
    const watched = await measure([ENTRY], { DATA_DIR: dataDir });
    const existing = { ...watched, startMs: [...starts, watched].map((run) => run.startMs).sort((a, b) => a - b)[1]! };
    const row = (label: string, run: Run) =>
      console.log(
        `${label.padEnd(34)} start ${(run.startMs / 1000).toFixed(2).padStart(6)} s   RSS ${mb(run.startedRssMb)} after 5 s, ${mb(run.settledRssMb)} after ${SETTLED_MS / 1000} s`,
      );
    console.log(`\nfootprint on node ${runtime.version} (embedded database; node ${NODE_ARGS.join(' ')})`);
    row('bare node:http, same flags', bare);
    row('service, new DATA_DIR', fresh);
    row('service, existing DATA_DIR (3)', existing);
    console.log(
      `settled RSS over the bare process: ${(existing.settledRssMb - bare.settledRssMb).toFixed(0)} MB (existing data), ${(fresh.settledRssMb - bare.settledRssMb).toFixed(0)} MB (new)`,
    );
    const load = await underLoad({ DATA_DIR: dataDir });
    printLoad(`embedded database, node ${runtime.version}`, load);
    figures.push({ runtime, bare, existing, load });
    if (BASE_DATABASE_URL && runtime === RUNTIMES[0]) {
      const scratch = await createScratchDatabase(BASE_DATABASE_URL);
      try {
        printLoad(
          `PostgreSQL, node ${runtime.version}`,
          await underLoad({ DATA_DIR: dataDir, DATABASE_URL: scratch.url, MASTER_KEY: randomBytes(32).toString('base64') }),
        );
      } finally {
        await scratch.drop();
      }
    }
  } finally {
    rmSync(dataDir, { recursive: true, force: true });
  }
}

// The aims of the footprint, each with its figure on every major measured.
const aims: Array<[string, (f: Figures) => number, (value: number) => string, (value: number) => boolean]> = [
  ['settled RSS, existing data (aim < 150 MB)', (f) => f.existing.settledRssMb, (x) => `${x.toFixed(0)} MB`, (x) => x < 150],
  ['over the bare process (aim <= 80 MB)', (f) => f.existing.settledRssMb - f.bare.settledRssMb, (x) => `${x.toFixed(0)} MB`, (x) => x <= 80],
  ['bare node:http, settled', (f) => f.bare.settledRssMb, (x) => `${x.toFixed(0)} MB`, () => true],
  [`RSS right after ${LOAD_CLIENTS} clients, last run`, (f) => f.load.runs.at(-1)!.rssAfterMb, (x) => `${x.toFixed(0)} MB`, () => true],
  ['first answer on existing data (aim < 1 s)', (f) => f.existing.startMs / 1000, (x) => `${x.toFixed(2)} s`, (x) => x < 1],
];
console.log(`\naims per major (embedded database)`);
console.log(`${''.padEnd(44)}${figures.map((f) => `node ${f.runtime.version}`.padStart(18)).join('')}`);
for (const [label, figure, shown, met] of aims) {
  console.log(
    `${label.padEnd(44)}${figures
      .map((f) => {
        const value = figure(f);
        return `${shown(value)}${met(value) ? '' : ' (not met)'}`.padStart(18);
      })
      .join('')}`,
  );
}

function printLoad(database: string, { idleRssMb, runs }: Load): void {
  console.log(`\nunder load (${database}; ${LOAD_CLIENTS} clients, ${LOAD_SECONDS} s a run, settled = ${SETTLED_MS / 1000} s later)`);
  console.log(`${'settled before the first run'.padEnd(34)} RSS ${mb(idleRssMb)}`);
  runs.forEach((run, index) =>
    console.log(
      `${`run ${index + 1}`.padEnd(34)} ${run.requestsPerSecond.toFixed(0).padStart(5)} req/s   RSS ${mb(run.rssAfterMb)} right after, ${mb(run.settledRssMb)} settled`,
    ),
  );
  console.log(`settled RSS, last run against the first: ${(runs.at(-1)!.settledRssMb - runs[0]!.settledRssMb).toFixed(0)} MB (a leak grows it run after run)`);
}
