import type { IncomingMessage, Server } from 'node:http';
import type { Duplex } from 'node:stream';
import { WebSocketServer, type WebSocket } from 'ws';
import type { Authenticator } from '../auth/credentials.ts';
import { presentedCredentials } from '../auth/credentials.ts';
import { CREDENTIALS_REVOKED, type CredentialsRevoked } from '../auth/revocation.ts';
import type { Metrics } from '../http/metrics.ts';
import type { Logger } from '../logger.ts';
import type { Principal } from '../rpc/context.ts';
import { RpcError } from '../rpc/errors.ts';
import type { BusEvent, EventBus } from './bus.ts';

export const WS_PATH = '/ws';
const HEARTBEAT_MS = 30_000;

interface Client {
  socket: WebSocket;
  principal: Principal;
  alive: boolean;
}

/**
 * `GET /ws`: clients authenticate like RPC callers and receive the bus events
 * that concern them as `{type: 'event', event, payload, at}`.
 */
export class WebSocketHub {
  readonly #server = new WebSocketServer({ noServer: true, maxPayload: 64 * 1024 });
  readonly #bySubscription = new Map<string, Set<Client>>();
  readonly #authenticator: Authenticator;
  readonly #logger: Logger;
  readonly #metrics: Metrics;
  readonly #heartbeat: NodeJS.Timeout;
  readonly #unsubscribe: (() => void)[];

  constructor({ authenticator, bus, logger, metrics }: { authenticator: Authenticator; bus: EventBus; logger: Logger; metrics: Metrics }) {
    this.#authenticator = authenticator;
    this.#logger = logger;
    this.#metrics = metrics;
    this.#unsubscribe = [
      bus.subscribe('*', (event) => this.#broadcast(event)),
      bus.subscribe(CREDENTIALS_REVOKED, (event) => this.#disconnect(event.payload as CredentialsRevoked)),
    ];
    this.#heartbeat = setInterval(() => this.#sweep(), HEARTBEAT_MS).unref();
  }

  get connectionCount(): number {
    let count = 0;
    for (const set of this.#bySubscription.values()) count += set.size;
    return count;
  }

  attach(server: Server): void {
    server.on('upgrade', (req, socket, head) => void this.#upgrade(req, socket, head));
  }

  async #upgrade(req: IncomingMessage, socket: Duplex, head: Buffer): Promise<void> {
    const url = new URL(req.url ?? '/', 'http://localhost');
    if (url.pathname !== WS_PATH) return refuse(socket, 404, 'Not Found');
    let principal: Principal | null;
    try {
      principal = await this.#authenticator.authenticate(presentedCredentials(req.headers, url.searchParams));
    } catch (error) {
      if (!(error instanceof RpcError)) this.#logger.error({ err: error }, 'WebSocket authentication failed');
      principal = null;
    }
    if (!principal) {
      this.#metrics.webSockets.inc({ outcome: 'refused' });
      return refuse(socket, 401, 'Unauthorized');
    }
    const accepted = principal;
    this.#server.handleUpgrade(req, socket, head, (ws) => this.#accept(ws, accepted));
  }

  #accept(socket: WebSocket, principal: Principal): void {
    this.#metrics.webSockets.inc({ outcome: 'accepted' });
    const client: Client = { socket, principal, alive: true };
    let set = this.#bySubscription.get(principal.subscriptionId);
    if (!set) this.#bySubscription.set(principal.subscriptionId, (set = new Set()));
    set.add(client);
    socket.on('pong', () => (client.alive = true));
    socket.on('message', (data) => {
      // The only client message is an application-level ping, for clients that cannot send protocol pings.
      if (data.toString() === '{"type":"ping"}') socket.send('{"type":"pong"}');
    });
    socket.on('close', () => {
      set.delete(client);
      if (set.size === 0) this.#bySubscription.delete(principal.subscriptionId);
    });
    socket.on('error', (err) => this.#logger.debug({ err }, 'WebSocket error'));
    socket.send(JSON.stringify({ type: 'ready', userId: principal.userId, subscriptionId: principal.subscriptionId }));
  }

  #broadcast(event: BusEvent): void {
    if (!event.subscriptionId) return;
    const clients = this.#bySubscription.get(event.subscriptionId);
    if (!clients) return;
    const text = JSON.stringify({ type: 'event', event: event.name, payload: event.payload, at: event.at });
    for (const client of clients) {
      if (!event.userIds || event.userIds.includes(client.principal.userId)) client.socket.send(text);
    }
  }

  #disconnect({ apiKeyId, sessionId, userId }: CredentialsRevoked): void {
    for (const set of this.#bySubscription.values()) {
      for (const { socket, principal } of set) {
        if (
          (apiKeyId && principal.apiKeyId === apiKeyId) ||
          (sessionId && principal.sessionId === sessionId) ||
          (userId && principal.userId === userId)
        ) {
          socket.close(4001, 'credential revoked');
        }
      }
    }
  }

  #sweep(): void {
    for (const set of this.#bySubscription.values()) {
      for (const client of set) {
        if (!client.alive) client.socket.terminate();
        else {
          client.alive = false;
          client.socket.ping();
        }
      }
    }
  }

  async close(): Promise<void> {
    clearInterval(this.#heartbeat);
    for (const unsubscribe of this.#unsubscribe) unsubscribe();
    for (const set of this.#bySubscription.values()) for (const { socket } of set) socket.close(1001, 'server shutting down');
    await new Promise<void>((resolve) => this.#server.close(() => resolve()));
  }
}

function refuse(socket: Duplex, status: number, reason: string): void {
  socket.end(`HTTP/1.1 ${status} ${reason}\r\nConnection: close\r\nContent-Length: 0\r\n\r\n`);
}
