import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';

/**
 * `npm run bench`: requests/s and p99 latency of
 *   (a) an authenticated operation that touches no table (NoteRpc.whoAmI with an API key),
 *   (b) ApiKeyRpc.getData,
 *   (c) a bare node:http server answering the same JSON,
 *   (d) stock Koa + @koa/router answering the same JSON,
 *   (e) the bare server of (c) run inside the service's process,
 * measured with wrk, interleaved over several rounds in one run, then the
 * ratios a/c, b/c and a/d, and a/e and e/c, which separate the cost of the
 * RPC layer from that of the process it runs in. Each target is its own process, so each gets a
 * core while wrk uses the other.
 */
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 5);
const SECONDS = Number(process.env.BENCH_SECONDS ?? 5);
const CONNECTIONS = Number(process.env.BENCH_CONNECTIONS ?? 32);
const here = fileURLToPath(new URL('.', import.meta.url));

interface Target {
  label: string;
  kind: 'rpc' | 'node' | 'koa' | 'inProcess';
  body: string;
  withKey: boolean;
}

const TARGETS: Target[] = [
  { label: 'a', kind: 'rpc', body: '{"method":"NoteRpc.whoAmI","params":{}}', withKey: true },
  { label: 'b', kind: 'rpc', body: '{"method":"ApiKeyRpc.getData","params":{}}', withKey: true },
  { label: 'c', kind: 'node', body: '{"method":"NoteRpc.whoAmI","params":{}}', withKey: false },
  { label: 'd', kind: 'koa', body: '{"method":"NoteRpc.whoAmI","params":{}}', withKey: false },
  { label: 'e', kind: 'inProcess', body: '{"method":"NoteRpc.whoAmI","params":{}}', withKey: false },
];

function ensureWrk(): void {
  if (spawnSync('wrk', ['--version']).error === undefined) return;
  console.log('wrk not found; installing it from Debian packages');
  const install = spawnSync('sh', ['-c', 'apt-get install -y -qq wrk || (apt-get update -qq && apt-get install -y -qq wrk)'], { stdio: 'inherit' });
  if (install.status !== 0) throw new Error('wrk is needed for the benchmark: apt-get install wrk');
}

interface Server {
  child: ChildProcess;
  url: string;
  apiKey: string;
  inProcessUrl: string;
}

async function startServer(kind: 'rpc' | 'node' | 'koa'): Promise<Server> {
  const child = spawn(process.execPath, ['--import', 'tsx', `${here}servers.ts`, kind], { stdio: ['ignore', 'pipe', 'inherit'] });
  const lines = createInterface({ input: child.stdout! });
  for await (const line of lines) {
    if (line.startsWith('READY ')) {
      const [, url, apiKey = '', inProcessUrl = ''] = line.split(' ');
      return { child, url: url!, apiKey, inProcessUrl };
    }
  }
  throw new Error(`benchmark server ${kind} exited before it was ready`);
}

interface Sample {
  rps: number;
  p99ms: number;
}

function toMs(text: string): number {
  const match = /^([\d.]+)(us|ms|s)$/.exec(text);
  if (!match) throw new Error(`cannot read latency ${text}`);
  const value = Number(match[1]);
  return match[2] === 'us' ? value / 1000 : match[2] === 's' ? value * 1000 : value;
}

function runWrk(url: string, target: Target, apiKey: string, seconds: number): Sample {
  const result = spawnSync(
    'wrk',
    ['-t1', `-c${CONNECTIONS}`, `-d${seconds}s`, '--latency', '-s', `${here}post.lua`, url],
    { encoding: 'utf8', env: { ...process.env, BENCH_BODY: target.body, BENCH_API_KEY: target.withKey ? apiKey : '' } },
  );
  const output = result.stdout;
  const rps = /Requests\/sec:\s+([\d.]+)/.exec(output);
  const p99 = /\s99%\s+([\d.]+\w+)/.exec(output);
  if (!rps || !p99 || /Non-2xx/.test(output)) throw new Error(`wrk failed for ${target.label}:\n${output}${result.stderr}`);
  return { rps: Number(rps[1]), p99ms: toMs(p99[1]!) };
}

const median = (values: number[]) => [...values].sort((x, y) => x - y)[Math.floor(values.length / 2)]!;

ensureWrk();
const rpcServer = await startServer('rpc');
const servers: Record<Target['kind'], Server> = {
  rpc: rpcServer,
  node: await startServer('node'),
  koa: await startServer('koa'),
  inProcess: { ...rpcServer, url: rpcServer.inProcessUrl },
};
const samples = new Map<string, Sample[]>(TARGETS.map((target) => [target.label, []]));
try {
  for (const target of TARGETS) runWrk(servers[target.kind].url, target, servers.rpc.apiKey, 1); // warm-up
  for (let round = 1; round <= ROUNDS; round++) {
    for (const target of TARGETS) {
      const sample = runWrk(servers[target.kind].url, target, servers.rpc.apiKey, SECONDS);
      samples.get(target.label)!.push(sample);
      console.log(`round ${round} ${target.label}: ${sample.rps.toFixed(0)} req/s, p99 ${sample.p99ms.toFixed(2)} ms`);
    }
  }
} finally {
  for (const { child } of new Set(Object.values(servers))) child.kill('SIGTERM');
}

const summary = Object.fromEntries(
  TARGETS.map((target) => {
    const list = samples.get(target.label)!;
    return [target.label, { rps: median(list.map((s) => s.rps)), p99ms: median(list.map((s) => s.p99ms)) }];
  }),
) as Record<'a' | 'b' | 'c' | 'd' | 'e', Sample>;

const names = {
  a: 'authenticated operation, no table (NoteRpc.whoAmI)',
  b: 'ApiKeyRpc.getData',
  c: 'bare node:http',
  d: 'stock Koa + @koa/router',
  e: 'bare node:http inside the service process',
};
console.log(`\nmedian of ${ROUNDS} rounds of ${SECONDS} s, ${CONNECTIONS} connections, wrk -t1`);
for (const label of ['a', 'b', 'c', 'd', 'e'] as const) {
  console.log(`(${label}) ${names[label].padEnd(52)} ${summary[label].rps.toFixed(0).padStart(7)} req/s   p99 ${summary[label].p99ms.toFixed(2)} ms`);
}
console.log(`\na/c = ${(summary.a.rps / summary.c.rps).toFixed(2)}   (aim: at least 0.5)`);
console.log(`b/c = ${(summary.b.rps / summary.c.rps).toFixed(2)}`);
console.log(`a/d = ${(summary.a.rps / summary.d.rps).toFixed(2)}`);
console.log(`a/e = ${(summary.a.rps / summary.e.rps).toFixed(2)}   (the RPC layer alone: same process, same runtime costs)`);
console.log(`e/c = ${(summary.e.rps / summary.c.rps).toFixed(2)}   (what the service's process costs a bare handler)`);
