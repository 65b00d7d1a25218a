import { randomUUID } from 'node:crypto';
import pg from 'pg';
import * as v from 'valibot';
import { GroupWrite } from '../db/group-write.ts';
import { pgArray } from '../db/pg-array.ts';
import type { Logger } from '../base/logger.ts';
import type { Principal } from '../base/context.ts';
import type { EventDeclaration } from './catalogue.ts';

/**
 * An event on the bus. Events with a subscriptionId reach that subscription's
 * WebSocket clients (only `userIds` when given); events without one stay
 * inside the service (cache invalidation, plugin subscribers).
 */
export interface BusEvent<P = unknown> {
  /** Unique per publication: webhooks carry it as the event's id. */
  id: string;
  /** The node that published it: work to do once per event (not once per node) is done where it started. */
  origin: string;
  name: string;
  payload: P;
  subscriptionId?: string | null;
  userIds?: readonly string[] | null;
  /** A name the tenant chose (a scheduled task's eventName), not one of the catalogue's: delivered like any other. */
  tenantDefined?: boolean;
  /** ISO 8601 time of publication. */
  at: string;
}

export type BusHandler = (event: BusEvent) => void | Promise<void>;

/** Whether a caller receives an event (RequestPipeline.hears). */
export type Audience = (principal: Principal, event: Pick<BusEvent, 'name' | 'userIds'>) => boolean;

export type PublishInput<P = unknown> = Omit<BusEvent<P>, 'id' | 'origin' | 'at'>;

/** Emitted locally after the fan-out connection was lost and regained: caches must drop what they hold. */
export const BUS_RESYNC = 'core.bus.resync';

const CHANNEL = 'rpc_events';
// NOTIFY payloads must stay under 8000 bytes; bigger events travel through a table.
const MAX_INLINE_PAYLOAD = 7000;

interface Notification {
  origin: string;
  event?: BusEvent;
  ref?: string;
}

interface FanOut {
  client: pg.Client | null;
  stopped: boolean;
  cleanup: NodeJS.Timeout;
  retryMs: number;
  execute: (sql: string, params?: unknown[]) => Promise<Record<string, unknown>[]>;
  /** The notifications of events published at the same moment, sent in one statement. */
  notifications: GroupWrite<string>;
}

/** Throws when a payload, as clients receive it (after JSON), is outside its declared schema. */
function checkPayload(input: PublishInput, schema: v.GenericSchema | undefined): void {
  if (!schema) return;
  const wire: unknown = JSON.parse(JSON.stringify(input.payload) ?? 'null');
  const checked = v.safeParse(schema, wire, { abortEarly: false });
  if (checked.success) return;
  const problems = checked.issues.map((issue) => `${v.getDotPath(issue) ?? '(payload)'}: ${issue.message}`);
  throw new Error(`Event "${input.name}" was published outside its declared payload: ${problems.slice(0, 10).join('; ')}`);
}

/**
 * The in-process event bus. With PostgreSQL it also fans events out to every
 * node through LISTEN/NOTIFY, so a client of any node hears any node's events.
 */
export class EventBus {
  readonly nodeId = randomUUID();
  readonly #handlers = new Map<string, Set<BusHandler>>();
  readonly #logger: Logger;
  #fanOut: FanOut | null = null;
  /** Names of the events clients may receive (the `core.events` catalogue); null before the plugins are loaded. */
  #catalogue: ReadonlySet<string> | null = null;
  /** The declared payloads by event name, to check each publication against; null unless checked (tests), so production pays nothing. */
  #payloads: ReadonlyMap<string, v.GenericSchema> | null = null;
  #audience: Audience | null = null;

  constructor(logger: Logger) {
    this.#logger = logger;
  }

  /**
   * From now on, an event for clients must be in the catalogue, so webhooks
   * and clients can rely on the list; with `checkPayloads` (CHECK_RESULTS, as
   * the Dispatcher checks answers), a payload outside its declared schema is
   * the publishing plugin's fault, thrown to it.
   */
  useCatalogue(events: readonly EventDeclaration[], { checkPayloads = false }: { checkPayloads?: boolean } = {}): void {
    this.#catalogue = new Set(events.map((event) => event.name));
    this.#payloads = checkPayloads ? new Map(events.flatMap((event) => (event.payload ? [[event.name, event.payload] as const] : []))) : null;
  }

  /** Set once by the core (core/app/app.ts): the admission step of the request pipeline decides who hears what. */
  useAudience(audience: Audience): void {
    this.#audience = audience;
  }

  /**
   * Whether a caller receives an event: what the WebSocket sends them, and
   * what the webhook of their API key gets (one rule for both doors: the
   * users the event is for, and an API key's scopes against its group).
   */
  hears(principal: Principal, event: Pick<BusEvent, 'name' | 'userIds'>): boolean {
    if (!this.#audience) throw new Error('Who hears an event is known once the request pipeline exists');
    return this.#audience(principal, event);
  }

  /** Subscribes to one event name, or to every event with `*`; returns the unsubscribe function. */
  subscribe(name: string, handler: BusHandler): () => void {
    let set = this.#handlers.get(name);
    if (!set) this.#handlers.set(name, (set = new Set()));
    set.add(handler);
    return () => set.delete(handler);
  }

  /** Whether the catalogue declares this name (a tenant may not choose it for events of their own). */
  isCatalogued(name: string): boolean {
    return this.#catalogue?.has(name) ?? false;
  }

  async publish<P>(input: PublishInput<P>): Promise<void> {
    if (input.tenantDefined && this.isCatalogued(input.name)) throw new Error(`Event "${input.name}" is the catalogue's: a tenant may not raise it`);
    if (input.subscriptionId && this.#catalogue && !input.tenantDefined && !this.#catalogue.has(input.name)) {
      throw new Error(`Event "${input.name}" is not in the event catalogue: declare it with extends: {'core.events': [...]}`);
    }
    if (this.#payloads && !input.tenantDefined) checkPayload(input, this.#payloads.get(input.name));
    const event: BusEvent<P> = { ...input, id: randomUUID(), origin: this.nodeId, at: new Date().toISOString() };
    this.#deliver(event);
    if (this.#fanOut) await this.#notify(this.#fanOut, event);
  }

  #deliver(event: BusEvent): void {
    for (const key of [event.name, '*']) {
      for (const handler of this.#handlers.get(key) ?? []) {
        try {
          const result = handler(event);
          if (result instanceof Promise) result.catch((error) => this.#handlerFailed(event, error));
        } catch (error) {
          this.#handlerFailed(event, error);
        }
      }
    }
  }

  #handlerFailed(event: BusEvent, err: unknown): void {
    this.#logger.error({ err, event: event.name }, 'event subscriber failed');
  }

  async #notify(fanOut: FanOut, event: BusEvent): Promise<void> {
    let text = JSON.stringify({ origin: this.nodeId, event } satisfies Notification);
    if (Buffer.byteLength(text) > MAX_INLINE_PAYLOAD) {
      const [row] = await fanOut.execute('insert into core_event_payload (body) values (?) returning id', [JSON.stringify(event)]);
      text = JSON.stringify({ origin: this.nodeId, ref: String(row!.id) } satisfies Notification);
    }
    await fanOut.notifications.add(text);
  }

  /** Starts the cross-node fan-out on a dedicated PostgreSQL connection. */
  async startFanOut(databaseUrl: string, execute: (sql: string, params?: unknown[]) => Promise<Record<string, unknown>[]>): Promise<void> {
    // Oversized payloads are only needed while their notification is in flight.
    const prune = () =>
      execute(`delete from core_event_payload where created_at < now() - interval '1 hour'`).catch((err) =>
        this.#logger.warn({ err }, 'could not prune old event payloads'),
      );
    const cleanup = setInterval(prune, 10 * 60_000).unref();
    // In the order given: one statement's notifications are delivered in the order it makes them.
    const notifications = new GroupWrite<string>(
      (texts) => execute('select pg_notify(?, text) from unnest(?::text[]) with ordinality as n(text, position) order by position', [CHANNEL, pgArray(texts)]),
      { maxBatch: 100 },
    );
    this.#fanOut = { client: null, stopped: false, cleanup, retryMs: 500, execute, notifications };
    await this.#listen(this.#fanOut, databaseUrl);
    await prune();
  }

  async #listen(fanOut: FanOut, databaseUrl: string): Promise<void> {
    const client = new pg.Client({ connectionString: databaseUrl });
    client.on('notification', (message) => {
      if (message.channel === CHANNEL && message.payload) void this.#receive(fanOut, message.payload);
    });
    client.on('error', (err) => this.#logger.warn({ err }, 'event fan-out connection failed'));
    client.on('end', () => {
      if (fanOut.stopped) return;
      fanOut.client = null;
      this.#logger.warn({ retryMs: fanOut.retryMs }, 'event fan-out connection lost; reconnecting');
      setTimeout(() => this.#reconnect(fanOut, databaseUrl), fanOut.retryMs).unref();
    });
    await client.connect();
    await client.query(`listen ${CHANNEL}`);
    fanOut.client = client;
    fanOut.retryMs = 500;
  }

  async #reconnect(fanOut: FanOut, databaseUrl: string): Promise<void> {
    if (fanOut.stopped) return;
    try {
      await this.#listen(fanOut, databaseUrl);
      this.#logger.info('event fan-out connection restored');
      // Events sent while this node was not listening are lost: tell caches to start over.
      this.#deliver({ id: randomUUID(), origin: this.nodeId, name: BUS_RESYNC, payload: null, at: new Date().toISOString() });
    } catch (err) {
      fanOut.retryMs = Math.min(fanOut.retryMs * 2, 30_000);
      this.#logger.warn({ err, retryMs: fanOut.retryMs }, 'event fan-out reconnect failed');
      setTimeout(() => this.#reconnect(fanOut, databaseUrl), fanOut.retryMs).unref();
    }
  }

  async #receive(fanOut: FanOut, text: string): Promise<void> {
    try {
      const message = JSON.parse(text) as Notification;
      if (message.origin === this.nodeId) return;
      let event = message.event;
      if (!event && message.ref) {
        const [row] = await fanOut.execute('select body from core_event_payload where id = ?', [message.ref]);
        const body = row?.body;
        event = (typeof body === 'string' ? JSON.parse(body) : body) as BusEvent | undefined;
      }
      if (event) this.#deliver(event);
    } catch (err) {
      this.#logger.error({ err }, 'could not read a fanned-out event');
    }
  }

  async close(): Promise<void> {
    if (!this.#fanOut) return;
    this.#fanOut.stopped = true;
    clearInterval(this.#fanOut.cleanup);
    await this.#fanOut.client?.end().catch(() => undefined);
    this.#fanOut = null;
  }
}
