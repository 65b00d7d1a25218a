import { connect } from 'node:net';
import { fileURLToPath } from 'node:url';
import { runInProject } from './process.ts';
import type { Envelope } from './wire.ts';

/**
 * A client that writes its whole request, head then body, before it reads
 * anything, and reports what came back once the server closed the
 * connection. It runs in a process of its own (`sendWhole`), so the server's
 * reads and closes race its writes as they would over a network; in the
 * server's own event loop the body would be written before the server reads.
 */

/** How the body is framed: a true Content-Length, chunks without one, or a Content-Length 1 MiB above what is sent. */
export type Framing = 'length' | 'chunked' | 'lying';

export interface NaiveRequest {
  method: 'POST' | 'PUT';
  url: string;
  path: string;
  headers: Record<string, string>;
  /** Body size in bytes (the body is that many "x"). */
  size: number;
  framing: Framing;
  /** Sent one after the other, each on a new connection. */
  rounds: number;
}

export interface NaiveAnswer {
  status?: number;
  headers: Record<string, string>;
  /** The spec's envelope the server answered with, parsed. */
  body?: Envelope;
  /** The socket error the client saw (EPIPE, ECONNRESET), if any. */
  error?: string;
}

const MiB = 1024 * 1024;

/** Sends the request `rounds` times from another process; one answer per round. */
export async function sendWhole(request: NaiveRequest, timeoutMs = 60_000): Promise<NaiveAnswer[]> {
  const run = runInProject(process.execPath, ['--import', 'tsx', fileURLToPath(import.meta.url), JSON.stringify(request)], {});
  const exit = await run.exited(timeoutMs);
  if (exit.code !== 0) throw new Error(`the naive client failed (${exit.code ?? exit.signal}): ${run.stderr()}`);
  return JSON.parse(run.stdout()) as NaiveAnswer[];
}

function sendOnce({ method, url, path, headers, size, framing }: NaiveRequest): Promise<NaiveAnswer> {
  const { hostname, port } = new URL(url);
  const body = Buffer.alloc(size, 'x');
  return new Promise((resolve) => {
    const socket = connect(Number(port), hostname);
    const received: Buffer[] = [];
    let error: string | undefined;
    socket.on('data', (chunk) => received.push(chunk));
    socket.on('error', (err: NodeJS.ErrnoException) => (error ??= err.code ?? err.message));
    socket.on('close', () => resolve({ ...parseResponse(Buffer.concat(received)), error }));
    const framingHeader = framing === 'chunked' ? 'Transfer-Encoding: chunked' : `Content-Length: ${size + (framing === 'lying' ? MiB : 0)}`;
    const head = Object.entries(headers)
      .map(([name, value]) => `${name}: ${value}\r\n`)
      .join('');
    socket.write(`${method} ${path} HTTP/1.1\r\nHost: ${hostname}\r\n${head}${framingHeader}\r\n\r\n`);
    if (framing === 'chunked') {
      for (let at = 0; at < size; at += 64 * 1024) {
        const chunk = body.subarray(at, at + 64 * 1024);
        socket.write(`${chunk.length.toString(16)}\r\n`);
        socket.write(chunk);
        socket.write('\r\n');
      }
      socket.write('0\r\n\r\n');
    } else {
      socket.write(body);
    }
    // The lying client has nothing more to send: it ends its side and waits for the answer.
    if (framing === 'lying') socket.end();
  });
}

function parseResponse(bytes: Buffer): Omit<NaiveAnswer, 'error'> {
  const split = bytes.indexOf('\r\n\r\n');
  if (split === -1) return { headers: {} };
  const [statusLine, ...lines] = bytes.subarray(0, split).toString('latin1').split('\r\n');
  const headers = Object.fromEntries(lines.map((line) => [line.slice(0, line.indexOf(':')).toLowerCase(), line.slice(line.indexOf(':') + 1).trim()]));
  const text = bytes.subarray(split + 4, split + 4 + Number(headers['content-length'] ?? 0)).toString('utf8');
  return { status: Number(statusLine!.split(' ')[1]), headers, body: text ? (JSON.parse(text) as Envelope) : undefined };
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  const request = JSON.parse(process.argv[2]!) as NaiveRequest;
  const answers: NaiveAnswer[] = [];
  for (let round = 0; round < request.rounds; round++) answers.push(await sendOnce(request));
  process.stdout.write(JSON.stringify(answers));
}
