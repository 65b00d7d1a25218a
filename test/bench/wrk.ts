export interface WrkResult {
  rps: number;
  p50ms: number;
  p99ms: number;
}

/** What wrk's `--latency` report says: requests/s and the p50 and p99 latencies in ms, or undefined when it holds no such lines. */
export function readWrk(output: string): WrkResult | undefined {
  const rps = /Requests\/sec:\s+([\d.]+)/.exec(output);
  const p50 = /\s50%\s+([\d.]+\w+)/.exec(output);
  const p99 = /\s99%\s+([\d.]+\w+)/.exec(output);
  if (!rps || !p50 || !p99) return undefined;
  return { rps: Number(rps[1]), p50ms: toMs(p50[1]!), p99ms: toMs(p99[1]!) };
}

function toMs(text: string): number {
  const match = /^([\d.]+)(us|ms|s)$/.exec(text);
  if (!match) throw new Error(`cannot read latency ${text}`);
  const value = Number(match[1]);
  return match[2] === 'us' ? value / 1000 : match[2] === 's' ? value * 1000 : value;
}
