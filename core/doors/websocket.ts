import type { IncomingMessage, Server } from 'node:http';
import type { Duplex } from 'node:stream';
import { WebSocketServer, type WebSocket } from 'ws';
import type { WebSocketLimits } from '../base/config.ts';
import { presentedCredentials, type Authenticator, type PresentedCredentials } from '../credentials/authenticator.ts';
import type { RequestPipeline } from '../rpc/pipeline.ts';
import { concerns, CREDENTIALS_CHANGED, type CredentialsChanged } from '../credentials/revocation.ts';
import { clientIpOf } from './request-info.ts';
import type { Metrics } from '../base/metrics.ts';
import type { Logger } from '../base/logger.ts';
import type { Principal } from '../base/context.ts';
import { errorBody } from '../rpc/dispatch.ts';
import { RpcError } from '../base/errors.ts';
import { BUS_RESYNC, type BusEvent, type EventBus } from '../events/bus.ts';

export const WS_PATH = '/ws';
export const CLOSE_CREDENTIAL_REVOKED = 4001;

type Refusal = 'unauthenticated' | 'user_limit' | 'address_limit' | 'total_limit' | 'key_rate_limit' | 'origin';

interface Client {
  socket: WebSocket;
  principal: Principal;
  /** Kept to re-check the connection when its credential changes. */
  presented: PresentedCredentials;
  alive: boolean;
}

/**
 * `GET /ws`: clients authenticate like RPC callers and receive the bus events
 * that concern them as `{type: 'event', event, payload, at}`.
 */
export class WebSocketHub {
  readonly #server = new WebSocketServer({ noServer: true, maxPayload: 64 * 1024 });
  readonly #clients = new Set<Client>();
  readonly #bySubscription = new Map<string, Set<Client>>();
  readonly #authenticator: Authenticator;
  readonly #logger: Logger;
  readonly #metrics: Metrics;
  readonly #heartbeat: NodeJS.Timeout;
  readonly #unsubscribe: (() => void)[];
  readonly #limits: WebSocketLimits;
  readonly #trustProxy: boolean;
  /** Sent as Retry-After with a refusal over a limit: within two beats, dead connections are gone and their slots free. */
  readonly #retryAfterSeconds: number;
  /** Sockets holding a slot: open ones, and upgrades under way (each holds a descriptor while it is authenticated). */
  #held = 0;
  readonly #byAddress = new Map<string, number>();
  readonly #byUser = new Map<string, number>();
  readonly #pipeline: Pick<RequestPipeline, 'hears' | 'meter'>;
  readonly #sameOrigin: (req: IncomingMessage) => boolean;

  constructor({
    authenticator,
    bus,
    logger,
    metrics,
    heartbeatMs,
    limits,
    trustProxy,
    pipeline,
    publicUrl,
    allowedOrigins,
  }: {
    authenticator: Authenticator;
    bus: EventBus;
    logger: Logger;
    metrics: Metrics;
    heartbeatMs: number;
    limits: WebSocketLimits;
    /** Count addresses as X-Forwarded-For gives them (TRUST_PROXY). */
    trustProxy: boolean;
    /** Which events a caller hears (as its webhook does) and an opening counted against an API key's rate. */
    pipeline: Pick<RequestPipeline, 'hears' | 'meter'>;
    /** PUBLIC_URL: its origin may open a socket with the session cookie. */
    publicUrl: string | undefined;
    /** Other origins that may (WS_ALLOWED_ORIGINS). */
    allowedOrigins: readonly string[];
  }) {
    this.#pipeline = pipeline;
    this.#sameOrigin = originCheck(publicUrl, allowedOrigins, trustProxy);
    this.#authenticator = authenticator;
    this.#limits = limits;
    this.#trustProxy = trustProxy;
    this.#retryAfterSeconds = Math.ceil(heartbeatMs / 1000);
    this.#logger = logger;
    this.#metrics = metrics;
    this.#unsubscribe = [
      bus.subscribe('*', (event) => this.#broadcast(event)),
      bus.subscribe(CREDENTIALS_CHANGED, (event) => this.#recheck(concerns(event.payload as CredentialsChanged))),
      // Changes may have been missed while the fan-out was down: check everyone.
      bus.subscribe(BUS_RESYNC, () => this.#recheck(() => true)),
    ];
    this.#heartbeat = setInterval(() => this.#sweep(), heartbeatMs).unref();
  }

  attach(server: Server): void {
    server.on('upgrade', (req, socket, head) => void this.#upgrade(req, socket, head));
  }

  async #upgrade(req: IncomingMessage, socket: Duplex, head: Buffer): Promise<void> {
    // Node stops watching a socket handed over for upgrade: a reset would otherwise crash the process.
    const onError = (err: Error) => {
      this.#logger.debug({ err }, 'WebSocket upgrade socket error');
      socket.destroy();
    };
    socket.on('error', onError);
    const url = new URL(req.url ?? '/', 'http://localhost');
    if (url.pathname !== WS_PATH) return refuse(socket, 404, 'Not Found');
    if (socket.destroyed) return;
    // The caps that need no database come first, so a flood over them costs no query.
    const { perUser, perAddress, total } = this.#limits;
    if (this.#held >= total) return this.#overLimit(socket, 'total_limit', 'The server holds as many WebSockets as it may; try again later');
    const address = clientIpOf(req, this.#trustProxy);
    if ((this.#byAddress.get(address) ?? 0) >= perAddress) {
      return this.#overLimit(socket, 'address_limit', `Too many WebSockets from this address (at most ${perAddress}); close one and try again`);
    }
    // The slot is held from here until the socket closes, whichever way the upgrade ends.
    let userId: string | undefined;
    this.#held++;
    count(this.#byAddress, address, 1);
    socket.once('close', () => {
      this.#held--;
      count(this.#byAddress, address, -1);
      if (userId !== undefined) count(this.#byUser, userId, -1);
    });
    const presented = presentedCredentials(req.headers, url.searchParams);
    // A browser sends the cookie whichever page opens the socket: only pages of the service (or origins allowed) may use it.
    if (presented.sessionToken !== undefined && byCookie(req, url) && !this.#sameOrigin(req)) {
      this.#metrics.webSockets.inc({ outcome: 'refused', reason: 'origin' });
      const body = JSON.stringify({
        success: false,
        data: errorBody(
          new RpcError('FORBIDDEN', 'A WebSocket opened with the session cookie must come from a page of this service (or an origin in WS_ALLOWED_ORIGINS)'),
        ),
      });
      return refuse(socket, 403, 'Forbidden', { 'Content-Type': 'application/json; charset=utf-8' }, body);
    }
    const generation = this.#authenticator.generation;
    const principal = await this.#authenticate(presented);
    if (socket.destroyed) return;
    if (!principal) {
      this.#metrics.webSockets.inc({ outcome: 'refused', reason: 'unauthenticated' });
      return refuse(socket, 401, 'Unauthorized');
    }
    if ((this.#byUser.get(principal.userId) ?? 0) >= perUser) {
      return this.#overLimit(socket, 'user_limit', `Too many WebSockets for this user (at most ${perUser}); close one and try again`);
    }
    try {
      await this.#pipeline.meter(principal);
    } catch (error) {
      if (!(error instanceof RpcError) || error.code !== 'RATE_LIMITED') throw error;
      return this.#overLimit(socket, 'key_rate_limit', error.message, error.retryAfter);
    }
    if (socket.destroyed) return;
    userId = principal.userId;
    count(this.#byUser, userId, 1);
    socket.off('error', onError);
    this.#server.handleUpgrade(req, socket, head, (ws) => {
      const client = this.#accept(ws, principal, presented);
      // A credential changed while this one was being checked: check it again.
      if (this.#authenticator.generation !== generation) void this.#verify(client);
    });
  }

  /** Refuses an upgrade over one of the caps: 429 with Retry-After and the error in the RPC envelope. */
  #overLimit(socket: Duplex, reason: Refusal, message: string, retryAfter = this.#retryAfterSeconds): void {
    this.#metrics.webSockets.inc({ outcome: 'refused', reason });
    this.#logger.debug({ reason }, 'WebSocket refused over a limit');
    const body = JSON.stringify({ success: false, data: errorBody(new RpcError('RATE_LIMITED', message)) });
    refuse(socket, 429, 'Too Many Requests', { 'Retry-After': String(retryAfter), 'Content-Type': 'application/json; charset=utf-8' }, body);
  }

  async #authenticate(presented: PresentedCredentials, touch = true): Promise<Principal | null> {
    try {
      return await this.#authenticator.authenticate(presented, { touch });
    } catch (error) {
      if (!(error instanceof RpcError)) this.#logger.error({ err: error }, 'WebSocket authentication failed');
      return null;
    }
  }

  #accept(socket: WebSocket, principal: Principal, presented: PresentedCredentials): Client {
    this.#metrics.webSockets.inc({ outcome: 'accepted' });
    this.#metrics.webSocketsOpen.inc();
    const client: Client = { socket, principal, presented, alive: true };
    this.#clients.add(client);
    let tenantClients = this.#bySubscription.get(principal.subscriptionId);
    if (!tenantClients) this.#bySubscription.set(principal.subscriptionId, (tenantClients = new Set()));
    tenantClients.add(client);
    socket.on('pong', () => (client.alive = true));
    socket.on('message', (data) => {
      // The only client message is an application-level ping, for clients that cannot send protocol pings.
      if (data.toString() === '{"type":"ping"}') socket.send('{"type":"pong"}');
    });
    socket.on('close', () => {
      this.#metrics.webSocketsOpen.dec();
      this.#clients.delete(client);
      tenantClients.delete(client);
      if (tenantClients.size === 0) this.#bySubscription.delete(principal.subscriptionId);
    });
    socket.on('error', (err) => this.#logger.debug({ err }, 'WebSocket error'));
    socket.send(JSON.stringify({ type: 'ready', userId: principal.userId, subscriptionId: principal.subscriptionId }));
    return client;
  }

  #broadcast(event: BusEvent): void {
    if (!event.subscriptionId) return;
    let text: string | undefined;
    for (const client of this.#bySubscription.get(event.subscriptionId) ?? []) {
      if (!this.#pipeline.hears(client.principal, event)) continue;
      text ??= JSON.stringify({ type: 'event', event: event.name, payload: event.payload, at: event.at });
      client.socket.send(text);
    }
  }

  #recheck(match: (principal: Principal) => boolean): void {
    for (const client of this.#clients) if (match(client.principal)) void this.#verify(client);
  }

  /**
   * Closes the connection when its credential no longer holds; otherwise
   * takes the fresh principal. An open socket alone does not keep a session alive.
   */
  async #verify(client: Client): Promise<void> {
    const principal = await this.#authenticate(client.presented, false);
    if (principal) client.principal = principal;
    else client.socket.close(CLOSE_CREDENTIAL_REVOKED, 'credential revoked');
  }

  /** Drops connections that stopped answering pings, and those whose session expired meanwhile. */
  #sweep(): void {
    for (const client of this.#clients) {
      if (!client.alive) client.socket.terminate();
      else {
        client.alive = false;
        client.socket.ping();
        void this.#verify(client);
      }
    }
  }

  async close(): Promise<void> {
    clearInterval(this.#heartbeat);
    for (const unsubscribe of this.#unsubscribe) unsubscribe();
    for (const { socket } of this.#clients) socket.close(1001, 'server shutting down');
    await new Promise<void>((resolve) => this.#server.close(() => resolve()));
  }
}

/**
 * Answers an upgrade with a plain HTTP response and closes the socket once it
 * is sent: the server leaves sockets half open, and one whose client never
 * closes its side would otherwise hold its descriptor for good.
 */
function refuse(socket: Duplex, status: number, reason: string, headers: Record<string, string> = {}, body = ''): void {
  const lines = Object.entries({ ...headers, Connection: 'close', 'Content-Length': String(Buffer.byteLength(body)) }).map(
    ([name, value]) => `${name}: ${value}\r\n`,
  );
  socket.end(`HTTP/1.1 ${status} ${reason}\r\n${lines.join('')}\r\n${body}`, () => socket.destroy());
}

/** Whether the credential came only from the session cookie: a header or the query is something the page had to know. */
function byCookie(req: IncomingMessage, url: URL): boolean {
  const { cookie: _cookie, ...headers } = req.headers;
  const other = presentedCredentials(headers, url.searchParams);
  return other.apiKey === undefined && other.sessionToken === undefined && other.accessToken === undefined;
}

/**
 * Whether an upgrade's Origin is the service's own: the host the request was
 * sent to (as X-Forwarded-Host gives it with TRUST_PROXY), PUBLIC_URL's
 * origin, or one of WS_ALLOWED_ORIGINS. A request with no Origin is not a
 * browser's (browsers always send it on a WebSocket), so a page cannot have made it.
 */
function originCheck(publicUrl: string | undefined, allowed: readonly string[], trustProxy: boolean): (req: IncomingMessage) => boolean {
  const origins = new Set([...allowed, ...(publicUrl ? [new URL(publicUrl).origin] : [])]);
  return (req) => {
    const origin = req.headers.origin;
    if (origin === undefined) return true;
    if (origins.has(origin)) return true;
    const forwarded = trustProxy
      ? String(req.headers['x-forwarded-host'] ?? '')
          .split(',')[0]!
          .trim()
      : '';
    const host = forwarded || req.headers.host;
    return URL.canParse(origin) && host !== undefined && new URL(origin).host === host.toLowerCase();
  };
}

/** Adds `by` to the count of `key`, dropping keys that reach zero. */
function count(counts: Map<string, number>, key: string, by: number): void {
  const value = (counts.get(key) ?? 0) + by;
  if (value === 0) counts.delete(key);
  else counts.set(key, value);
}
