import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import { createScratchDatabase, type ScratchDatabase } from '../support/database.ts';
import { supportedRuntimes } from '../support/runtimes.ts';
import { readWrk } from './wrk.ts';

/**
 * The throughput part of `npm run bench` (footprint.ts is the other): requests/s and p99 latency of
 *   (a) an authenticated operation that touches no table (NoteRpc.whoAmI with an API key),
 *   (b) ApiKeyRpc.getData,
 *   (c) a bare node:http server answering the same JSON as (a),
 *   (d) stock Koa + @koa/router answering the same JSON,
 *   (e) the bare server of (c) run inside the service's process,
 *   (f) a bare node:http server answering what (b) answers, from the same SQL
 *       sent straight to the same database (pg.Pool on PostgreSQL; on PGlite
 *       inside the service's process, on its one connection),
 *   (g) SecretsRpc.getSecretValue: a read that decrypts under the keyring and
 *       writes its audit entry before answering,
 *   (h) the call of (a) as JSON-RPC 2.0, at the same endpoint,
 *   (i) the call of (a) on a second service with tracing on, its spans sent
 *       over OTLP/HTTP to a loopback sink in a process of its own,
 * measured with wrk, interleaved over several rounds in one run, then the
 * ratios a/c, i/c, i/a, b/c, b/f, g/b, h/a and a/d, and a/e and e/c, which separate the cost of
 * the RPC layer from that of the process it runs in. Each target is its own
 * process, so each gets a core while wrk uses the other. Then (a) and (i) again
 * on each supported Node.js major (BENCH_MAJORS=24,22 picks), for what
 * tracing costs on each: Node 24's AsyncLocalStorage runs without async hooks.
 *
 * BENCH_DATABASE_URL=postgres://... runs on a scratch database created on that
 * server (and dropped after); PGlite otherwise. BENCH_TARGETS=b,f measures only
 * those; BENCH_PROFILE=<dir> writes CPU profiles of the service's process and
 * of (f)'s pg.Pool server there, to compare the two.
 */
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 5);
const SECONDS = Number(process.env.BENCH_SECONDS ?? 5);
const CONNECTIONS = Number(process.env.BENCH_CONNECTIONS ?? 32);
const BASE_DATABASE_URL = process.env.BENCH_DATABASE_URL || undefined;
const PROFILE_DIR = process.env.BENCH_PROFILE || undefined;
const here = fileURLToPath(new URL('.', import.meta.url));

type Label = 'a' | 'b' | 'c' | 'd' | 'e' | 'f' | 'g' | 'h' | 'i';
type Kind = 'rpc' | 'node' | 'koa' | 'inProcess' | 'direct' | 'traced';

interface Target {
  label: Label;
  name: string;
  kind: Kind;
  body: string;
  withKey: boolean;
}

const WHO_AM_I = '{"method":"NoteRpc.whoAmI","params":{}}';
const GET_DATA = '{"method":"ApiKeyRpc.getData","params":{}}';
const WHO_AM_I_JSON_RPC = '{"jsonrpc":"2.0","method":"NoteRpc.whoAmI","params":{},"id":1}';
const GET_SECRET_VALUE = '{"method":"SecretsRpc.getSecretValue","params":{"zone":"bench","key":"TOKEN"}}';
const ALL_TARGETS: Target[] = [
  { label: 'a', name: 'authenticated operation, no table (NoteRpc.whoAmI)', kind: 'rpc', body: WHO_AM_I, withKey: true },
  { label: 'b', name: 'ApiKeyRpc.getData', kind: 'rpc', body: GET_DATA, withKey: true },
  { label: 'c', name: 'bare node:http', kind: 'node', body: WHO_AM_I, withKey: false },
  { label: 'd', name: 'stock Koa + @koa/router', kind: 'koa', body: WHO_AM_I, withKey: false },
  { label: 'e', name: 'bare node:http inside the service process', kind: 'inProcess', body: WHO_AM_I, withKey: false },
  {
    label: 'f',
    name: BASE_DATABASE_URL ? 'bare node:http + pg.Pool, same SQL as (b)' : 'bare node:http + same PGlite, same SQL as (b)',
    kind: 'direct',
    body: GET_DATA,
    withKey: false,
  },
  { label: 'g', name: 'SecretsRpc.getSecretValue (decrypted, audited)', kind: 'rpc', body: GET_SECRET_VALUE, withKey: true },
  { label: 'h', name: '(a) as JSON-RPC 2.0', kind: 'rpc', body: WHO_AM_I_JSON_RPC, withKey: true },
  { label: 'i', name: '(a) with tracing on, spans sent over OTLP', kind: 'traced', body: WHO_AM_I, withKey: true },
];
const TARGETS = process.env.BENCH_TARGETS ? ALL_TARGETS.filter((target) => process.env.BENCH_TARGETS!.split(',').includes(target.label)) : ALL_TARGETS;

function ensureWrk(): void {
  if (spawnSync('wrk', ['--version']).error === undefined) return;
  console.log('wrk not found; installing it from Debian packages');
  const install = spawnSync('sh', ['-c', 'apt-get install -y -qq wrk || (apt-get update -qq && apt-get install -y -qq wrk)'], { stdio: 'inherit' });
  if (install.status !== 0) throw new Error('wrk is needed for the benchmark: apt-get install wrk');
}

interface Server {
  child: ChildProcess;
  /** What the server printed after READY. */
  fields: string[];
}

type ServerKind = 'rpc' | 'node' | 'koa' | 'pg' | 'sink';

async function startServer(node: string, kind: ServerKind, args: string[] = [], env: Record<string, string> = {}): Promise<Server> {
  const profile = (kind === 'rpc' || kind === 'pg') && PROFILE_DIR ? ['--cpu-prof', '--cpu-prof-dir', PROFILE_DIR] : [];
  const child = spawn(node, [...profile, '--import', 'tsx', `${here}servers.ts`, kind, ...args], {
    stdio: ['ignore', 'pipe', 'inherit'],
    env: { ...process.env, ...env },
  });
  const lines = createInterface({ input: child.stdout! });
  for await (const line of lines) {
    if (line.startsWith('READY ')) return { child, fields: line.split(' ').slice(1) };
  }
  throw new Error(`benchmark server ${kind} exited before it was ready`);
}

interface Sample {
  rps: number;
  p50ms: number;
  p99ms: number;
}

function runWrk(url: string, target: Target, apiKey: string, seconds: number): Sample {
  const result = spawnSync('wrk', ['-t1', `-c${CONNECTIONS}`, `-d${seconds}s`, '--latency', '-s', `${here}post.lua`, url], {
    encoding: 'utf8',
    env: { ...process.env, BENCH_BODY: target.body, BENCH_API_KEY: target.withKey ? apiKey : '' },
  });
  const output = result.stdout;
  const read = readWrk(output);
  if (!read || /Non-2xx/.test(output)) throw new Error(`wrk failed for ${target.label}:\n${output}${result.stderr}`);
  return { rps: read.rps, p50ms: read.p50ms, p99ms: read.p99ms };
}

const median = (values: number[]) => [...values].sort((x, y) => x - y)[Math.floor(values.length / 2)]!;

/** Requests/s and p99 of the targets, interleaved over ROUNDS rounds, every process on `node`; the medians by label. */
async function measureThroughput(
  databaseUrl: string | undefined,
  targets = TARGETS,
  node = process.execPath,
  log = true,
): Promise<Partial<Record<Label, Sample>>> {
  const children: ChildProcess[] = [];
  const start = async (kind: ServerKind, args?: string[], env?: Record<string, string>) => {
    const server = await startServer(node, kind, args, env);
    children.push(server.child);
    return server.fields;
  };
  const samples = new Map<Label, Sample[]>(targets.map((target) => [target.label, []]));
  try {
    const [rpcUrl, apiKey, inProcessUrl, subscriptionId, userId, directUrl] = await start('rpc', databaseUrl ? [databaseUrl] : []);
    const needs = (kind: Kind) => targets.some((target) => target.kind === kind);
    // (i) runs on a database of its own (PGlite in memory, or a second scratch database), so its key is its own.
    const [tracedUrl, tracedKey] = needs('traced') ? await startTraced(start, databaseUrl) : [];
    const keys: Partial<Record<Kind, string>> = { rpc: apiKey, traced: tracedKey };
    const urls: Record<Kind, string> = {
      rpc: rpcUrl!,
      inProcess: inProcessUrl!,
      node: needs('node') ? (await start('node'))[0]! : '',
      koa: needs('koa') ? (await start('koa'))[0]! : '',
      direct: databaseUrl && needs('direct') ? (await start('pg', [databaseUrl, subscriptionId!, userId!]))[0]! : directUrl!,
      traced: tracedUrl ?? '',
    };
    for (const target of targets) runWrk(urls[target.kind], target, keys[target.kind] ?? '', 1); // warm-up
    for (let round = 1; round <= ROUNDS; round++) {
      for (const target of targets) {
        const sample = runWrk(urls[target.kind], target, keys[target.kind] ?? '', SECONDS);
        samples.get(target.label)!.push(sample);
        if (log) console.log(`round ${round} ${target.label}: ${sample.rps.toFixed(0)} req/s, p99 ${sample.p99ms.toFixed(2)} ms`);
      }
    }
  } finally {
    await Promise.all(
      children.map((child) => new Promise((resolve) => (child.exitCode !== null ? resolve(null) : (child.once('exit', resolve), child.kill('SIGTERM'))))),
    );
  }
  return Object.fromEntries(
    [...samples].map(([label, list]) => [
      label,
      { rps: median(list.map((s) => s.rps)), p50ms: median(list.map((s) => s.p50ms)), p99ms: median(list.map((s) => s.p99ms)) },
    ]),
  );
}

/** (i)'s own scratch databases on PostgreSQL, dropped with the run's. */
const tracedScratches: ScratchDatabase[] = [];

/** The service with OTEL_EXPORTER_OTLP_ENDPOINT at a sink answering 200, as a collector would: its URL and API key. */
async function startTraced(start: (kind: ServerKind, args?: string[], env?: Record<string, string>) => Promise<string[]>, databaseUrl?: string) {
  const [sinkUrl] = await start('sink');
  const tracedScratch = databaseUrl ? await createScratchDatabase(BASE_DATABASE_URL!) : undefined;
  if (tracedScratch) tracedScratches.push(tracedScratch);
  const [url, key] = await start('rpc', tracedScratch ? [tracedScratch.url] : [], { OTEL_EXPORTER_OTLP_ENDPOINT: sinkUrl! });
  return [url!, key!];
}

function printThroughput(summary: Partial<Record<Label, Sample>>): void {
  console.log(`\nmedian of ${ROUNDS} rounds of ${SECONDS} s, ${CONNECTIONS} connections, wrk -t1, ${BASE_DATABASE_URL ? 'PostgreSQL' : 'PGlite'}`);
  for (const target of TARGETS) {
    const sample = summary[target.label]!;
    console.log(
      `(${target.label}) ${target.name.padEnd(52)} ${sample.rps.toFixed(0).padStart(7)} req/s   p50 ${sample.p50ms.toFixed(2)} ms   p99 ${sample.p99ms.toFixed(2)} ms`,
    );
  }
  const ratio = (x: Label, y: Label, note = '') => {
    if (summary[x] && summary[y]) console.log(`${x}/${y} = ${(summary[x].rps / summary[y].rps).toFixed(2)}${note}`);
  };
  console.log('');
  ratio('a', 'c', '   (aim: at least 0.75)');
  ratio('i', 'c', '   (a/c with tracing on)');
  ratio('i', 'a', '   (what tracing costs the call)');
  ratio('b', 'c', `   (aim: at least ${BASE_DATABASE_URL ? '0.25' : '0.15'})`);
  ratio(
    'b',
    'f',
    BASE_DATABASE_URL
      ? '   (aim: at least 0.7; the ORM and RPC layers over the same query)'
      : '   (the ORM and RPC layers over the same query on the same PGlite)',
  );
  ratio(
    'g',
    'b',
    `   (an audited secret read, its entry written with those of the reads at the same moment, against a plain list read; aim: ${BASE_DATABASE_URL ? 'at least 0.5, ' : ''}p99 under 50 ms)`,
  );
  ratio('h', 'a', "   (the JSON-RPC 2.0 envelope against the spec's, same operation; aim: at least 0.9)");
  ratio('a', 'd');
  ratio('a', 'e', '   (the RPC layer alone: same process, same runtime costs; aim: at least 0.85)');
  ratio('e', 'c', "   (what the service's process costs a bare handler)");
}

/** (i)/(a) on each supported major, this process's included (its own figures measured again, beside the others). */
async function printTracingPerMajor(databaseUrl: string | undefined): Promise<void> {
  const pair = ALL_TARGETS.filter((target) => target.label === 'a' || target.label === 'i');
  const rows: string[] = [];
  for (const runtime of supportedRuntimes(process.env.BENCH_MAJORS)) {
    const { a, i } = await measureThroughput(databaseUrl, pair, runtime.node, false);
    rows.push(
      `node ${runtime.version.padEnd(9)} (a) ${a!.rps.toFixed(0).padStart(6)} req/s   (i) ${i!.rps.toFixed(0).padStart(6)} req/s   i/a = ${(i!.rps / a!.rps).toFixed(2)}`,
    );
  }
  console.log(`\nwhat tracing costs the call per major (median of ${ROUNDS} rounds; aim on Node 24: i/a at least 0.85)`);
  for (const row of rows) console.log(row);
}

ensureWrk();
let scratch: ScratchDatabase | undefined;
try {
  if (BASE_DATABASE_URL) scratch = await createScratchDatabase(BASE_DATABASE_URL);
  printThroughput(await measureThroughput(scratch?.url));
  if (!process.env.BENCH_TARGETS) await printTracingPerMajor(scratch?.url);
} finally {
  await scratch?.drop();
  for (const traced of tracedScratches) await traced.drop();
}
