import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import pg from 'pg';
import { createApp } from '../../core/app/app.ts';
import { loadConfig } from '../../core/base/config.ts';
import { createScratchDatabase, type ScratchDatabase } from '../support/database.ts';
import { TEST_MASTER_KEY } from '../support/harness.ts';
import type { Envelope, ResultOf } from '../support/wire.ts';
import { readWrk, type WrkResult } from './wrk.ts';

/**
 * N service nodes on one PostgreSQL, for docs/scaling.md: for each N of
 * BENCH_NODES (1,2,4), a fresh scratch database, N nodes in processes of
 * their own (separate DATA_DIRs, the same DATABASE_URL and MASTER_KEY; the
 * first migrates, the others start together after it), a few tenants set up
 * through them, then a mixed load through all of them: one wrk per node,
 * BENCH_CONNECTIONS split between them, the req/s summed and the worst p50
 * and p99 kept. Each round also samples the CPU (/proc/<pid>/stat) of the
 * nodes, of wrk and of the PostgreSQL processes serving the scratch
 * database, against the machine's busy time; before the rounds, what the
 * nodes and PostgreSQL use with no load.
 *
 * The mix, per tenant and in turn on every connection: ApiKeyRpc.getData
 * (the prepared hot read) twice, TaskRpc.getData (a page of 20 of a board)
 * twice, TaskRpc.findById twice, SecretsRpc.getSecretValue (decrypt, and an
 * audit insert before answering) once, TaskRpc.create (an insert) once.
 *
 *   node --import tsx test/bench/nodes.ts
 *
 * BENCH_DATABASE_URL (default postgres://postgres@127.0.0.1:5432/test: the
 * server the scratch databases are made on), BENCH_NODES, BENCH_SECONDS
 * (10), BENCH_ROUNDS (3, the median is kept), BENCH_CONNECTIONS (32 in all),
 * BENCH_TENANTS (4), BENCH_WARM_UP_SECONDS (20 of load before the rounds: a
 * node keeps getting faster for its first tens of seconds),
 * BENCH_QUIET_SECONDS (300: the longest wait for an idle machine before a
 * round), BENCH_OPERATIONS (methods of the mix to keep, comma-separated: to
 * see what one costs alone).
 */
const BASE_DATABASE_URL = process.env.BENCH_DATABASE_URL || 'postgres://postgres@127.0.0.1:5432/test';
const NODE_COUNTS = (process.env.BENCH_NODES ?? '1,2,4').split(',').map(Number);
const SECONDS = Number(process.env.BENCH_SECONDS ?? 10);
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 3);
const CONNECTIONS = Number(process.env.BENCH_CONNECTIONS ?? 32);
const TENANTS = Number(process.env.BENCH_TENANTS ?? 4);
const QUIET_SECONDS = Number(process.env.BENCH_QUIET_SECONDS ?? 300);
const WARM_UP_SECONDS = Number(process.env.BENCH_WARM_UP_SECONDS ?? 20);
const IDLE_SECONDS = 5;
const ONLY = process.env.BENCH_OPERATIONS?.split(',');
const BOARD_TASKS = 20;
const here = fileURLToPath(new URL('.', import.meta.url));
const CLOCK_TICKS = Number(spawnSync('getconf', ['CLK_TCK'], { encoding: 'utf8' }).stdout.trim()) || 100;

/** One node: the service alone in this process, on the database and DATA_DIR given, answering at the URL printed after READY. */
async function runNode(databaseUrl: string, dataDir: string): Promise<void> {
  const config = loadConfig({
    ...process.env,
    DATA_DIR: dataDir,
    DATABASE_URL: databaseUrl,
    MASTER_KEY: TEST_MASTER_KEY,
    LOG_LEVEL: process.env.LOG_LEVEL ?? 'warn',
  });
  const app = await createApp({ config });
  const url = await app.listen(0, '127.0.0.1');
  const stop = async () => {
    await app.close().catch(() => undefined);
    process.exit(0);
  };
  process.once('SIGTERM', () => void stop());
  console.log(`READY ${url}`);
}

interface Node {
  child: ChildProcess;
  url: string;
}

/** A node with a DATA_DIR of its own under `dir`, which the caller removes (also when the node dies). */
async function startNode(databaseUrl: string, dir: string): Promise<Node> {
  const dataDir = mkdtempSync(path.join(dir, 'node-'));
  const child = spawn(process.execPath, ['--import', 'tsx', `${here}nodes.ts`, '--node', databaseUrl, dataDir], {
    stdio: ['ignore', 'pipe', 'inherit'],
    env: { ...process.env, SIGNUP_IP_LIMIT: '1000' },
  });
  for await (const line of createInterface({ input: child.stdout! })) {
    if (line.startsWith('READY ')) return { child, url: line.slice('READY '.length) };
  }
  throw new Error('a node exited before it was ready');
}

function stopProcess(child: ChildProcess): Promise<void> {
  return new Promise((resolve) => {
    if (child.exitCode !== null || child.signalCode !== null) return resolve();
    const timer = setTimeout(() => child.kill('SIGKILL'), 10_000);
    child.once('exit', () => (clearTimeout(timer), resolve()));
    child.kill('SIGTERM');
  });
}

async function call<M extends string>(url: string, method: M, params: unknown, headers: Record<string, string> = {}): Promise<ResultOf<M>> {
  const response = await fetch(`${url}/api/rpc`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', ...headers },
    body: JSON.stringify({ method, params }),
  });
  const body = (await response.json()) as Envelope;
  if (!body.success) throw new Error(`${method} failed: ${JSON.stringify(body.data)}`);
  return body.data as ResultOf<M>;
}

/** A tenant with an admin, an API key, a secret and a board of tasks: the requests of the mix, as [API key, body]. */
async function setUpTenant(url: string, index: number): Promise<[string, string][]> {
  const name = `nodes${Date.now()}t${index}`;
  const { token } = await call(url, 'AuthRpc.signup', { email: `${name}@example.com`, username: name, password: 'bench password' });
  const bearer = { authorization: `Bearer ${token}` };
  const { fullKey } = await call(url, 'ApiKeyRpc.create', { description: 'bench' }, bearer);
  await call(url, 'SecretsRpc.create', { zone: 'bench', key: 'TOKEN', value: 'bench secret value' }, bearer);
  let taskId = '';
  for (let i = 0; i < BOARD_TASKS; i++) {
    const task = await call(url, 'TaskRpc.create', { taskInstanceId: 'board', title: `Task ${i}`, tags: ['bench'] }, bearer);
    taskId ||= task._id;
  }
  const body = (method: string, params: unknown) => JSON.stringify({ method, params });
  const mix = [
    body('ApiKeyRpc.getData', {}),
    body('TaskRpc.getData', { taskInstanceId: 'board', pageSize: 20 }),
    body('TaskRpc.findById', { _id: taskId }),
    body('ApiKeyRpc.getData', {}),
    body('SecretsRpc.getSecretValue', { zone: 'bench', key: 'TOKEN' }),
    body('TaskRpc.getData', { taskInstanceId: 'board', pageSize: 20 }),
    body('TaskRpc.findById', { _id: taskId }),
    // Its own board, so the board read above keeps its size.
    body('TaskRpc.create', { taskInstanceId: 'inbox', title: 'New task', description: 'Made under load', tags: ['bench'] }),
  ];
  // Every request of the mix once, as wrk will send it, so a refusal shows here and not as a count of non-2xx answers.
  for (const text of mix) {
    const { method, params } = JSON.parse(text);
    await call(url, method, params, { 'x-api-key': fullKey });
  }
  return mix.filter((text) => !ONLY || ONLY.includes(JSON.parse(text).method)).map((text) => [fullKey, text]);
}

/** The wrk script: every request of the mix, formatted once, sent in turn on each connection's thread. */
function writeMixScript(dir: string, requests: [string, string][]): string {
  const quote = (text: string) => `[==[${text}]==]`;
  const file = path.join(dir, 'mix.lua');
  writeFileSync(
    file,
    [
      'local mix = {',
      ...requests.map(([key, body]) => `  {${quote(key)}, ${quote(body)}},`),
      '}',
      'local requests = {}',
      'local turn = 0',
      'init = function(args)',
      '  for _, item in ipairs(mix) do',
      '    requests[#requests + 1] = wrk.format("POST", "/api/rpc", {["Content-Type"] = "application/json", ["X-API-Key"] = item[1]}, item[2])',
      '  end',
      'end',
      'request = function()',
      '  turn = turn % #requests + 1',
      '  return requests[turn]',
      'end',
      '',
    ].join('\n'),
  );
  return file;
}

function runWrk(url: string, connections: number, seconds: number, script: string): { child: ChildProcess; done: Promise<WrkResult> } {
  const child = spawn('wrk', ['-t1', `-c${connections}`, `-d${seconds}s`, '--latency', '-s', script, `${url}/api/rpc`], { stdio: ['ignore', 'pipe', 'pipe'] });
  let output = '';
  child.stdout!.on('data', (chunk: Buffer) => (output += chunk.toString()));
  child.stderr!.on('data', (chunk: Buffer) => (output += chunk.toString()));
  const done = new Promise<WrkResult>((resolve, reject) => {
    child.once('exit', () => {
      const read = readWrk(output);
      if (!read || /Non-2xx|Socket errors/.test(output)) reject(new Error(`wrk failed against ${url}:\n${output}`));
      else resolve(read);
    });
  });
  return { child, done };
}

/** CPU ticks (user + system, all threads) of a process, or 0 once it is gone. */
function ticksOf(pid: number): number {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    return Number(fields[11]) + Number(fields[12]);
  } catch {
    return 0;
  }
}

function commandOf(pid: number): string | undefined {
  try {
    return readFileSync(`/proc/${pid}/comm`, 'utf8').trim();
  } catch {
    return undefined;
  }
}

/** The machine's busy ticks, all cores (everything but idle and iowait). */
function machineBusyTicks(): number {
  const [, ...values] = readFileSync('/proc/stat', 'utf8').split('\n')[0]!.trim().split(/\s+/);
  const numbers = values.map(Number);
  return numbers.slice(0, 8).reduce((sum, value) => sum + value, 0) - numbers[3]! - numbers[4]!;
}

/**
 * The PostgreSQL processes working for this run: the scratch database's
 * backends and the server's own (WAL writer, checkpointer, autovacuum...),
 * not other databases' backends.
 */
async function postgresPids(admin: pg.Client, database: string): Promise<number[]> {
  const { rows } = await admin.query<{ pid: number }>(`select pid from pg_stat_activity where datname = $1 or backend_type <> 'client backend'`, [database]);
  // Only processes on this machine can be sampled; a remote server gives no PostgreSQL figure.
  return rows.map((row) => row.pid).filter((pid) => commandOf(pid) === 'postgres');
}

interface Round extends WrkResult {
  /** Cores used on average during the round. */
  cpu: { postgres: number; nodes: number; wrk: number; machine: number };
}

async function measureRound(nodes: Node[], script: string, admin: pg.Client, database: string, seconds: number): Promise<Round> {
  const perNode = Math.max(1, Math.floor(CONNECTIONS / nodes.length));
  const before = new Map<number, number>();
  for (const pid of await postgresPids(admin, database)) before.set(pid, ticksOf(pid));
  const nodeTicks = nodes.map((node) => ticksOf(node.child.pid!));
  const busy = machineBusyTicks();
  const started = process.hrtime.bigint();
  const runs = nodes.map((node) => runWrk(node.url, perNode, seconds, script));
  // wrk's own CPU, sampled while it runs: a process that has exited has no /proc entry left to read.
  const wrkTicks = runs.map(() => 0);
  const sampler = setInterval(() => runs.forEach((run, i) => (wrkTicks[i] = Math.max(wrkTicks[i]!, ticksOf(run.child.pid!)))), 200);
  let results: WrkResult[];
  try {
    results = await Promise.all(runs.map((run) => run.done));
  } finally {
    clearInterval(sampler);
  }
  const elapsed = Number(process.hrtime.bigint() - started) / 1e9;
  const busyAfter = machineBusyTicks();
  let postgresTicks = 0;
  for (const pid of await postgresPids(admin, database)) postgresTicks += ticksOf(pid) - (before.get(pid) ?? 0);
  const nodeTicksAfter = nodes.map((node) => ticksOf(node.child.pid!));
  const cores = (ticks: number) => ticks / CLOCK_TICKS / elapsed;
  return {
    rps: results.reduce((sum, result) => sum + result.rps, 0),
    p50ms: Math.max(...results.map((result) => result.p50ms)),
    p99ms: Math.max(...results.map((result) => result.p99ms)),
    cpu: {
      postgres: cores(postgresTicks),
      nodes: cores(nodeTicksAfter.reduce((sum, ticks, i) => sum + ticks - nodeTicks[i]!, 0)),
      wrk: cores(wrkTicks.reduce((sum, ticks) => sum + ticks, 0)),
      machine: cores(busyAfter - busy),
    },
  };
}

/**
 * The machine is shared: before a round, wait (up to BENCH_QUIET_SECONDS) for a second in which
 * less than a quarter of a core is busy, so another program's burst is not measured as ours.
 */
async function waitForQuiet(): Promise<void> {
  const deadline = Date.now() + QUIET_SECONDS * 1000;
  for (;;) {
    const busy = machineBusyTicks();
    await new Promise((resolve) => setTimeout(resolve, 1000));
    const cores = (machineBusyTicks() - busy) / CLOCK_TICKS;
    if (cores < 0.25) return;
    if (Date.now() > deadline) {
      console.log(`the machine is still busy (${cores.toFixed(2)} cores) after ${QUIET_SECONDS} s: measuring anyway`);
      return;
    }
  }
}

/** Cores the nodes and PostgreSQL use with no request coming: pollers (scheduler, jobs, workflows), timers, GC. */
async function measureIdle(nodes: Node[], admin: pg.Client, database: string): Promise<{ nodes: number; postgres: number }> {
  const pids = await postgresPids(admin, database);
  const before = [nodes.map((node) => ticksOf(node.child.pid!)), pids.map(ticksOf)] as const;
  await new Promise((resolve) => setTimeout(resolve, IDLE_SECONDS * 1000));
  const sum = (ticks: number[], start: readonly number[]) => ticks.reduce((total, value, i) => total + value - start[i]!, 0) / CLOCK_TICKS / IDLE_SECONDS;
  return {
    nodes: sum(
      nodes.map((node) => ticksOf(node.child.pid!)),
      before[0],
    ),
    postgres: sum(pids.map(ticksOf), before[1]),
  };
}

/** The idle figures of each node count. */
const idle = new Map<number, { nodes: number; postgres: number }>();

const median = (values: number[]) => [...values].sort((x, y) => x - y)[Math.floor(values.length / 2)]!;

async function measureNodes(count: number): Promise<Round> {
  const scratch: ScratchDatabase = await createScratchDatabase(BASE_DATABASE_URL);
  const database = new URL(scratch.url).pathname.slice(1);
  const admin = new pg.Client({ connectionString: BASE_DATABASE_URL });
  const dir = mkdtempSync(path.join(tmpdir(), 'rpc-nodes-'));
  const nodes: Node[] = [];
  try {
    await admin.connect();
    // Every node at once: migrations and the job queues are made under the migration lock, one node at a time.
    const started = await Promise.allSettled(Array.from({ length: count }, () => startNode(scratch.url, dir)));
    for (const result of started) if (result.status === 'fulfilled') nodes.push(result.value);
    const failed = started.find((result) => result.status === 'rejected');
    if (failed) throw (failed as PromiseRejectedResult).reason;
    const requests: [string, string][] = [];
    for (let tenant = 0; tenant < TENANTS; tenant++) requests.push(...(await setUpTenant(nodes[tenant % count]!.url, tenant)));
    const script = writeMixScript(dir, requests);
    await measureRound(nodes, script, admin, database, WARM_UP_SECONDS); // JIT, pools, credential caches on every node
    await waitForQuiet();
    idle.set(count, await measureIdle(nodes, admin, database));
    const rounds: Round[] = [];
    for (let round = 1; round <= ROUNDS; round++) {
      await waitForQuiet();
      const result = await measureRound(nodes, script, admin, database, SECONDS);
      rounds.push(result);
      console.log(`${count} node(s), round ${round}: ${line(result)}`);
    }
    return {
      rps: median(rounds.map((r) => r.rps)),
      p50ms: median(rounds.map((r) => r.p50ms)),
      p99ms: median(rounds.map((r) => r.p99ms)),
      cpu: {
        postgres: median(rounds.map((r) => r.cpu.postgres)),
        nodes: median(rounds.map((r) => r.cpu.nodes)),
        wrk: median(rounds.map((r) => r.cpu.wrk)),
        machine: median(rounds.map((r) => r.cpu.machine)),
      },
    };
  } finally {
    await Promise.all(nodes.map((node) => stopProcess(node.child)));
    await admin.end().catch(() => undefined);
    await scratch.drop();
    rmSync(dir, { recursive: true, force: true });
  }
}

function line(r: Round): string {
  const other = Math.max(0, r.cpu.machine - r.cpu.postgres - r.cpu.nodes - r.cpu.wrk);
  return (
    `${r.rps.toFixed(0).padStart(6)} req/s   p50 ${r.p50ms.toFixed(1).padStart(6)} ms   p99 ${r.p99ms.toFixed(1).padStart(6)} ms   ` +
    `cores: PostgreSQL ${r.cpu.postgres.toFixed(2)}, nodes ${r.cpu.nodes.toFixed(2)}, wrk ${r.cpu.wrk.toFixed(2)}, other ${other.toFixed(2)} ` +
    `(machine busy ${r.cpu.machine.toFixed(2)}); CPU per request: PostgreSQL ${((r.cpu.postgres * 1000) / r.rps).toFixed(2)} ms, ` +
    `nodes ${((r.cpu.nodes * 1000) / r.rps).toFixed(2)} ms`
  );
}

if (process.argv[2] === '--node') {
  await runNode(process.argv[3]!, process.argv[4]!);
} else {
  if (spawnSync('wrk', ['--version']).error !== undefined) throw new Error('wrk is needed for this benchmark: apt-get install wrk');
  const summary: [number, Round][] = [];
  for (const count of NODE_COUNTS) summary.push([count, await measureNodes(count)]);
  console.log(`\nmedian of ${ROUNDS} rounds of ${SECONDS} s, ${CONNECTIONS} connections in all, ${TENANTS} tenants, one wrk -t1 per node`);
  for (const [count, result] of summary) console.log(`${String(count).padStart(2)} node(s): ${line(result)}`);
  for (const [count, cores] of idle)
    console.log(`${String(count).padStart(2)} node(s) idle: nodes ${cores.nodes.toFixed(3)} cores, PostgreSQL ${cores.postgres.toFixed(3)} cores`);
}
