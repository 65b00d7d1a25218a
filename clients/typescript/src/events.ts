import { RpcError } from './errors.ts';
import type { Events } from './operations.ts';

export interface EventStreamOptions {
  /** Connect again after the connection drops (default true). Events sent while it is down are not replayed. */
  reconnect?: boolean;
}

/** Who the stream listens as, once the service accepted it. */
export interface StreamReady {
  userId: string;
  subscriptionId: string;
}

/** An event as the service sends it: `payload` as the catalogue declares it for `event`. */
export interface EventMessage<N extends string = string> {
  event: N;
  payload: N extends keyof Events ? Events[N] : unknown;
  /** When it was published (ISO 8601). */
  at: string;
}

interface Connection {
  baseUrl: string;
  apiKey?: string;
  token?: string;
}

/** The WebSocket close code for a revoked credential (the service's core/doors/websocket.ts): connecting again cannot help. */
const CLOSE_CREDENTIAL_REVOKED = 4001;
const FIRST_BACKOFF_MS = 500;
const MAX_BACKOFF_MS = 30_000;

/** What the stream needs of a socket, from `ws` in Node or the platform's WebSocket in a browser. */
interface Socket {
  close(): void;
}

interface SocketEvents {
  message(text: string): void;
  /** `status` and `retryAfter` when the service refused the upgrade itself (401, 429). */
  close(code: number, status?: number, retryAfter?: number): void;
}

const inNode = typeof process !== 'undefined' && Boolean(process.versions?.node);

/**
 * `GET /ws` as a stream of typed events. In Node the credential goes in a
 * header; a browser's WebSocket cannot send one, so there it goes in the query
 * (or the session cookie does).
 */
async function openSocket({ baseUrl, apiKey, token }: Connection, on: SocketEvents): Promise<Socket> {
  const url = new URL('/ws', baseUrl.replace(/^http/, 'ws'));
  if (inNode) {
    const { default: WebSocket } = await import('ws');
    const headers: Record<string, string> = apiKey ? { 'x-api-key': apiKey } : token ? { authorization: `Bearer ${token}` } : {};
    const socket = new WebSocket(url, { headers });
    let refusal: { status: number; retryAfter?: number } | undefined;
    socket.on('unexpected-response', (_request, response) => {
      const retryAfter = Number(response.headers['retry-after']);
      refusal = { status: response.statusCode ?? 0, retryAfter: Number.isFinite(retryAfter) ? retryAfter : undefined };
      response.resume();
      socket.terminate();
    });
    socket.on('error', () => undefined); // a failure always ends in 'close', which decides what next
    socket.on('message', (data) => on.message(data.toString()));
    socket.on('close', (code) => on.close(code, refusal?.status, refusal?.retryAfter));
    return socket;
  }
  if (apiKey) url.searchParams.set('apiKey', apiKey);
  else if (token) url.searchParams.set('token', token);
  const socket = new WebSocket(url);
  socket.onmessage = (message) => on.message(String(message.data));
  socket.onclose = (event) => on.close(event.code);
  return socket;
}

type Handler = (message: EventMessage) => void;

/** The events of the caller's subscription that concern it, typed by the service's event catalogue. */
export class EventStream {
  /** Settles once the service accepted the first connection; rejects with an RpcError when it refused the credential. */
  readonly ready: Promise<StreamReady>;
  readonly #connection: Connection;
  readonly #reconnect: boolean;
  readonly #handlers = new Map<string, Set<Handler>>();
  #socket: Socket | undefined;
  #closed = false;
  #failures = 0;
  #timer: ReturnType<typeof setTimeout> | undefined;
  #settle!: { resolve: (ready: StreamReady) => void; reject: (error: RpcError) => void; done: boolean };

  constructor({ reconnect = true, ...connection }: Connection & EventStreamOptions) {
    this.#connection = connection;
    this.#reconnect = reconnect;
    this.ready = new Promise<StreamReady>((resolve, reject) => (this.#settle = { resolve, reject, done: false }));
    // Whoever never awaits `ready` still hears of a refusal through it, not as an unhandled rejection.
    this.ready.catch(() => undefined);
    this.#connect();
  }

  /** Calls `handler` with each `name` event; answers the function that stops it. */
  on<N extends keyof Events & string>(name: N, handler: (payload: Events[N], message: EventMessage<N>) => void): () => void;
  /** An event outside the catalogue (a scheduled task's own): its payload is what the task gave. */
  on(name: string, handler: (payload: unknown, message: EventMessage) => void): () => void;
  on(name: string, handler: (payload: never, message: never) => void): () => void {
    return this.#listen(name, (message) => (handler as (payload: unknown, message: EventMessage) => void)(message.payload, message));
  }

  /** Calls `handler` with every event. */
  onAny(handler: (message: EventMessage) => void): () => void {
    return this.#listen('*', handler);
  }

  close(): void {
    this.#closed = true;
    clearTimeout(this.#timer);
    this.#socket?.close();
    this.#fail(new RpcError({ code: 'NETWORK_ERROR', message: 'The event stream was closed before it was ready' }));
  }

  #listen(name: string, handler: Handler): () => void {
    let set = this.#handlers.get(name);
    if (!set) this.#handlers.set(name, (set = new Set()));
    set.add(handler);
    return () => set.delete(handler);
  }

  #connect(): void {
    openSocket(this.#connection, { message: (text) => this.#receive(text), close: (code, status, retryAfter) => this.#dropped(code, status, retryAfter) }).then(
      (socket) => {
        this.#socket = socket;
        if (this.#closed) socket.close();
      },
      (error: Error) => this.#fail(new RpcError({ code: 'NETWORK_ERROR', message: error.message, cause: error })),
    );
  }

  #receive(text: string): void {
    const message = JSON.parse(text) as { type: string } & StreamReady & EventMessage;
    if (message.type === 'ready') {
      this.#failures = 0;
      if (!this.#settle.done) {
        this.#settle.done = true;
        this.#settle.resolve({ userId: message.userId, subscriptionId: message.subscriptionId });
      }
      return;
    }
    if (message.type !== 'event') return;
    const { event, payload, at } = message;
    for (const handler of [...(this.#handlers.get(event) ?? []), ...(this.#handlers.get('*') ?? [])]) handler({ event, payload, at });
  }

  /** A refused credential or a revoked one ends the stream; anything else is tried again, after Retry-After when the service gave one. */
  #dropped(code: number, status?: number, retryAfter?: number): void {
    if (this.#closed) return;
    if (status === 401 || status === 403 || code === CLOSE_CREDENTIAL_REVOKED) {
      this.#closed = true;
      const revoked = code === CLOSE_CREDENTIAL_REVOKED;
      return this.#fail(
        new RpcError({
          code: revoked || status === 401 ? 'UNAUTHENTICATED' : 'FORBIDDEN',
          message: revoked ? 'The credential of the event stream was revoked' : 'The service refused the credential of the event stream',
          status: revoked ? 401 : status,
        }),
      );
    }
    if (!this.#reconnect) {
      this.#closed = true;
      return this.#fail(
        new RpcError({ code: status === 429 ? 'RATE_LIMITED' : 'NETWORK_ERROR', message: `The event stream closed (${status ?? code})`, status, retryAfter }),
      );
    }
    const wait = retryAfter !== undefined ? retryAfter * 1000 : Math.min(MAX_BACKOFF_MS, FIRST_BACKOFF_MS * 2 ** this.#failures);
    this.#failures++;
    this.#timer = setTimeout(() => this.#connect(), wait);
  }

  #fail(error: RpcError): void {
    if (this.#settle.done) return;
    this.#settle.done = true;
    this.#settle.reject(error);
  }
}
