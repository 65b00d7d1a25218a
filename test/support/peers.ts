import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { SMTPServer } from 'smtp-server';

export interface ReceivedMail {
  to: string[];
  raw: string;
}

/** A real SMTP server on loopback that keeps every message it receives. */
export async function startSmtpServer(): Promise<{ url: string; mails: ReceivedMail[]; close(): Promise<void> }> {
  const mails: ReceivedMail[] = [];
  const server = new SMTPServer({
    authOptional: true,
    disabledCommands: ['STARTTLS'],
    logger: false,
    onData(stream, session, callback) {
      const chunks: Buffer[] = [];
      stream.on('data', (chunk: Buffer) => chunks.push(chunk));
      stream.on('end', () => {
        mails.push({ to: session.envelope.rcptTo.map((rcpt) => rcpt.address), raw: Buffer.concat(chunks).toString('utf8') });
        callback();
      });
    },
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.server.address() as AddressInfo;
  return { url: `smtp://127.0.0.1:${port}`, mails, close: () => new Promise((resolve) => server.close(() => resolve())) };
}

export interface ReceivedText {
  path: string;
  authorization: string | undefined;
  form: URLSearchParams;
}

/** A Twilio-style messaging API on loopback: records each message and answers with a sid. */
export async function startTextProvider(): Promise<{ url: string; texts: ReceivedText[]; close(): Promise<void> }> {
  const texts: ReceivedText[] = [];
  const server: Server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (chunk: Buffer) => chunks.push(chunk));
    req.on('end', () => {
      texts.push({ path: req.url ?? '', authorization: req.headers.authorization, form: new URLSearchParams(Buffer.concat(chunks).toString()) });
      res.writeHead(201, { 'content-type': 'application/json' }).end(JSON.stringify({ sid: `SM${texts.length}` }));
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return { url: `http://127.0.0.1:${port}`, texts, close: () => new Promise((resolve) => server.close(() => resolve())) };
}

/** The six-digit code in a message text. */
export function codeIn(text: string): string {
  const match = /code is (\d{6})/.exec(text);
  if (!match) throw new Error(`no code in: ${text.slice(0, 200)}`);
  return match[1]!;
}

/**
 * Polls until `read` returns a value (deliveries are asynchronous on the peer's side). The default wait is long: it
 * ends as soon as the value comes, so only a failing test pays for it, while a loaded 2-core machine may take
 * seconds to poll a job and deliver.
 */
export async function eventually<T>(read: () => T | undefined | Promise<T | undefined>, timeoutMs = 30_000): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await read();
    if (value !== undefined) return value;
    if (Date.now() > deadline) throw new Error('timed out waiting');
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}

export interface ReceivedRequest {
  method: string;
  path: string;
  headers: Record<string, string>;
  body: string;
  /** Date.now() when it arrived. */
  at: number;
}

export interface Reply {
  status: number;
  headers?: Record<string, string>;
  /** Wait this long before answering. */
  delayMs?: number;
  /** Sent as JSON. */
  json?: unknown;
  /** Sent as it is (give its content-type in headers). */
  body?: string | Buffer;
}

/** An HTTP server on loopback that records every request and answers as `reply` says (200 by default); a webhook receiver. */
export async function startHttpReceiver(reply: (request: ReceivedRequest, index: number) => Reply = () => ({ status: 200 })) {
  const requests: ReceivedRequest[] = [];
  const server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (chunk: Buffer) => chunks.push(chunk));
    req.on('end', () => {
      const request: ReceivedRequest = {
        method: req.method ?? '',
        path: req.url ?? '',
        headers: Object.fromEntries(Object.entries(req.headers).map(([name, value]) => [name, String(value)])),
        body: Buffer.concat(chunks).toString('utf8'),
        at: Date.now(),
      };
      const answer = reply(request, requests.length);
      requests.push(request);
      const body = answer.json === undefined ? answer.body : JSON.stringify(answer.json);
      const headers = answer.json === undefined ? answer.headers : { 'content-type': 'application/json', ...answer.headers };
      // Unref'd: a reply held back longer than a test lasts must not keep the test's process alive.
      setTimeout(() => res.writeHead(answer.status, headers).end(body), answer.delayMs ?? 0).unref();
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    port,
    requests,
    close: () =>
      new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
      }),
  };
}
