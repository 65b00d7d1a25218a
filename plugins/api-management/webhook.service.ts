import { randomUUID } from 'node:crypto';
import {
  badRequest,
  defineRecord,
  notFound,
  OutboundRefusedError,
  validationError,
  wireTimestamp,
  type AuthenticatedContext,
  type BusEvent,
  type Database,
  type EventBus,
  type Jobs,
  type ListEnvelope,
  type Logger,
  type Outbound,
  type RowOf,
} from 'rpc-service/plugin';
import * as v from 'valibot';
import type { ApiManagementConfig } from './config.ts';
import { ATTEMPT_RECORD, DELIVERY_STATES, WebhookDelivery, type DeliveryState } from './delivery.entity.ts';
import { sendWebhook, type AttemptOutcome, type WebhookEvent } from './webhook-sender.ts';
import type { WebhookStore } from './webhook-store.ts';

export const WEBHOOK_TEST = 'webhook.test';
export const DELIVER_JOB = 'deliver';

/** A Retry-After never holds a delivery back longer than this. */
const MAX_RETRY_AFTER_SECONDS = 24 * 3600;
const ATTEMPT_LOG_LENGTH = 20;
/** A sender hands over to a fresh job after this long, so no job runs near its time limit. */
const DRAIN_BUDGET_MS = 4 * 60_000;

/** What registerWebhook answers: the test event reached the webhook, or why it did not. */
export const REGISTER_RESULT = v.variant('status', [
  v.strictObject({ success: v.literal(true), status: v.literal('verified') }),
  v.strictObject({ success: v.literal(true), status: v.literal('unreachable'), error: v.string() }),
]);
export type RegisterResult = v.InferOutput<typeof REGISTER_RESULT>;

const DELIVERY = defineRecord(WebhookDelivery, { hide: ['subscriptionId', 'seq', 'body'] });

/** The record of DELIVERY, with its attempts spelled out and `nextAttemptAt` only while a delivery is pending: afterwards no attempt is coming. */
export const DELIVERY_RECORD = v.strictObject({
  ...DELIVERY.entries,
  // An enumeration the view knows as text.
  state: v.picklist(DELIVERY_STATES),
  // Set on every row; toRecord clears it once the delivery is settled.
  nextAttemptAt: v.nullable(wireTimestamp),
  // A JSON column, any value to the view.
  attemptLog: v.array(ATTEMPT_RECORD),
});
export type DeliveryRecord = v.InferOutput<typeof DELIVERY_RECORD>;

interface Deps {
  db: Database;
  bus: EventBus;
  jobs: Jobs;
  outbound: Outbound;
  webhookStore: WebhookStore;
  config: ApiManagementConfig;
  logger: Logger;
}

const toRecord = (delivery: WebhookDelivery): DeliveryRecord => {
  const record = DELIVERY.toRecord(delivery);
  return delivery.state === 'pending' ? record : { ...record, nextAttemptAt: null };
};

/**
 * Webhooks of API keys: registration with a test event, and durable, signed,
 * ordered delivery of a subscription's events. Each event becomes one
 * delivery row per webhook; a `deliver` job sends an endpoint's due
 * deliveries oldest first while holding that endpoint's lease, so one sender
 * at a time keeps them in order, and a delivery being retried holds back the
 * later ones of its endpoint.
 */
export class WebhookService {
  readonly #deps: Deps;
  /** Deliveries of the events published on this node, written one event after the other. */
  #recording: Promise<void> = Promise.resolve();

  constructor(deps: Deps) {
    this.#deps = deps;
  }

  async registerWebhook(ctx: AuthenticatedContext, input: { webhookUrl: string; webhookSecret: string | null }): Promise<RegisterResult> {
    const { apiKeyId } = ctx;
    if (apiKeyId === null) {
      throw badRequest('registerWebhook registers the webhook of the API key you call with: call it with the X-API-Key header, not a session');
    }
    let url: URL;
    try {
      url = this.#deps.outbound.check(input.webhookUrl);
    } catch (error) {
      if (error instanceof OutboundRefusedError)
        throw validationError([{ path: 'webhookUrl', message: `webhookUrl must be publicly reachable: ${error.message}` }]);
      throw error;
    }
    const event: WebhookEvent = {
      id: randomUUID(),
      type: WEBHOOK_TEST,
      timestamp: new Date().toISOString(),
      subscriptionId: ctx.subscriptionId,
      data: { apiKeyId, message: 'Test event of the webhook registration' },
    };
    const target = { url: url.href, secret: input.webhookSecret };
    const outcome = await sendWebhook(this.#deps.outbound, target, { id: event.id, body: JSON.stringify(event) }, this.#deps.config.WEBHOOK_TEST_TIMEOUT_MS);
    const verified = outcome.kind === 'delivered';
    const stored = await this.#deps.webhookStore.registerWebhook(ctx, apiKeyId, { ...target, status: verified ? 'verified' : 'unreachable' });
    if (!stored) throw notFound('The API key of this call no longer exists');
    return verified ? { success: true, status: 'verified' } : { success: true, status: 'unreachable', error: outcome.error };
  }

  /**
   * A subscription's event becomes a delivery for each verified webhook whose
   * key hears it as its WebSocket would (`bus.hears`: an event meant for some
   * users only reaches their keys; a scoped key, the events of its groups),
   * with the key's rights as they are when the event is published. On the
   * node that published it, one event at a time, in publication order.
   */
  onEvent(event: BusEvent): Promise<void> {
    if (!event.subscriptionId || event.origin !== this.#deps.bus.nodeId) return Promise.resolve();
    const recorded = this.#recording.then(() => this.#recordDeliveries(event, event.subscriptionId!));
    this.#recording = recorded.catch(() => undefined);
    return recorded;
  }

  async #recordDeliveries(event: BusEvent, subscriptionId: string): Promise<void> {
    const recipients = (await this.#deps.webhookStore.recipients(subscriptionId)).filter(({ principal }) => this.#deps.bus.hears(principal, event));
    if (recipients.length === 0) return;
    const body = JSON.stringify({ id: event.id, type: event.name, timestamp: event.at, subscriptionId, data: event.payload } satisfies WebhookEvent);
    const firstAttemptAt = new Date(Date.now() + this.#deps.config.WEBHOOK_RETRY_SCHEDULE[0]! * 1000);
    await this.#deps.db.forkEm(subscriptionId).transactional(async (em) => {
      // Recipients come sorted by key id, so two transactions take the locks in the same order.
      for (const { apiKeyId } of recipients) {
        // One writer per endpoint until commit: a delivery's seq is then never below one already visible to a sender.
        await em.execute('select pg_advisory_xact_lock(hashtext(?), hashtext(?))', ['api-management.endpoint', apiKeyId]);
        em.create(WebhookDelivery, {
          id: randomUUID(),
          subscriptionId,
          apiKeyId,
          eventId: event.id,
          eventType: event.name,
          body,
          state: 'pending',
          attempts: 0,
          nextAttemptAt: firstAttemptAt,
          attemptLog: [],
          createdAt: new Date(),
        });
        await em.flush();
        await this.#deps.jobs.enqueue(DELIVER_JOB, { subscriptionId, apiKeyId }, { em, runAt: firstAttemptAt, subscriptionId });
      }
    });
  }

  /** Sends an endpoint's due deliveries in order, unless another sender holds it; looks again after letting go. */
  async drain(subscriptionId: string, apiKeyId: string): Promise<void> {
    const started = Date.now();
    for (;;) {
      const holder = randomUUID();
      if (!(await this.#claim(apiKeyId, holder))) return;
      try {
        await this.#sendDue(subscriptionId, apiKeyId, holder, started);
      } finally {
        await this.#deps.db.execute('delete from api_management_endpoint_lease where api_key_id = ? and holder = ?', [apiKeyId, holder]);
      }
      // A delivery added while the lease was held found it taken: it is this sender's to send, if it is next.
      const [head] = await this.#deps.db.execute<RowOf<WebhookDelivery, 'nextAttemptAt'>>(
        `select next_attempt_at from api_management_delivery where subscription_id = ? and api_key_id = ? and state = 'pending' order by seq limit 1`,
        [subscriptionId, apiKeyId],
      );
      const due = head !== undefined && new Date(head.next_attempt_at).getTime() <= Date.now();
      if (!due || Date.now() - started > DRAIN_BUDGET_MS) {
        if (due) await this.#wake(subscriptionId, apiKeyId);
        return;
      }
    }
  }

  /**
   * Endpoints whose next delivery is overdue (its wake-up lost with a node)
   * go to a sender again; finished deliveries past the retention go.
   */
  async sweep(): Promise<{ woken: number; pruned: number }> {
    const heads = await this.#deps.db.execute<RowOf<WebhookDelivery, 'subscriptionId' | 'apiKeyId'>>(
      `select subscription_id, api_key_id from (
         select distinct on (api_key_id) subscription_id, api_key_id, next_attempt_at from api_management_delivery
         where state = 'pending' order by api_key_id, seq
       ) head where next_attempt_at < now() - interval '1 minute'`,
    );
    for (const head of heads) await this.#wake(head.subscription_id, head.api_key_id);
    const pruned = await this.#deps.db.execute(
      `delete from api_management_delivery where state <> 'pending' and created_at < now() - make_interval(days => ?) returning id`,
      [this.#deps.config.WEBHOOK_DELIVERY_RETENTION_DAYS],
    );
    return { woken: heads.length, pruned: pruned.length };
  }

  async getDeliveries(
    ctx: AuthenticatedContext,
    query: { apiKeyId?: string; state?: DeliveryState; page: number; pageSize: number },
  ): Promise<ListEnvelope<DeliveryRecord>> {
    const where: Record<string, unknown> = {};
    if (query.apiKeyId) where.apiKeyId = query.apiKeyId;
    if (query.state) where.state = query.state;
    const [deliveries, totalCount] = await ctx.em.findAndCount(WebhookDelivery, where, {
      orderBy: { seq: 'desc' },
      limit: query.pageSize,
      offset: (query.page - 1) * query.pageSize,
    });
    return { data: deliveries.map(toRecord), totalCount };
  }

  /** Failed deliveries of a webhook (all, or those named) go again, in their order, with a fresh schedule. */
  async resendDeliveries(ctx: AuthenticatedContext, input: { apiKeyId: string; _ids?: string[] }): Promise<{ resent: number }> {
    const target = await this.#deps.webhookStore.target(ctx.subscriptionId, input.apiKeyId);
    if (!target) throw notFound(`No enabled API key ${input.apiKeyId} of an active user with a webhook`);
    if (target.status === 'disabled') throw badRequest('This webhook answered 410 Gone and is disabled: register it again first');
    const resent = await ctx.em.nativeUpdate(
      WebhookDelivery,
      { apiKeyId: input.apiKeyId, state: 'failed', ...(input._ids ? { id: { $in: input._ids } } : {}) },
      { state: 'pending', attempts: 0, nextAttemptAt: new Date(), lastError: null },
    );
    if (resent > 0) await this.#wake(ctx.subscriptionId, input.apiKeyId);
    return { resent };
  }

  async #claim(apiKeyId: string, holder: string): Promise<boolean> {
    const seconds = this.#deps.config.WEBHOOK_TIMEOUT_MS / 1000 + 30;
    const rows = await this.#deps.db.execute(
      `insert into api_management_endpoint_lease (api_key_id, holder, until) values (?, ?, now() + make_interval(secs => ?))
       on conflict (api_key_id) do update set holder = excluded.holder, until = excluded.until
       where api_management_endpoint_lease.until < now()
       returning holder`,
      [apiKeyId, holder, seconds],
    );
    return rows.length === 1;
  }

  async #sendDue(subscriptionId: string, apiKeyId: string, holder: string, started: number): Promise<void> {
    const { db, webhookStore, config } = this.#deps;
    while (Date.now() - started <= DRAIN_BUDGET_MS) {
      const em = db.forkEm(subscriptionId);
      const head = await em.findOne(WebhookDelivery, { apiKeyId, state: 'pending' }, { orderBy: { seq: 'asc' } });
      if (!head) return;
      if (head.nextAttemptAt.getTime() > Date.now()) {
        await this.#wake(subscriptionId, apiKeyId, head.nextAttemptAt);
        return;
      }
      const target = await webhookStore.target(subscriptionId, apiKeyId);
      if (!target || target.status === 'disabled') {
        await this.#failPending(
          em,
          apiKeyId,
          target
            ? 'the webhook is disabled (it answered 410 Gone)'
            : 'the API key was disabled or removed, or its webhook, or its owner deactivated or removed',
        );
        return;
      }
      // Checked again now, with the key's rights as they are (a retry or a resend may come long after the event was recorded):
      // the user an event was for never changes for a key, so the event's name is what its scopes are held against.
      if (!this.#deps.bus.hears(target.principal, { name: head.eventType })) {
        head.state = 'failed';
        head.lastError = `the API key no longer hears ${head.eventType} (its scopes or its owner's rights changed since the event), so it was not sent`;
        await em.flush();
        continue;
      }
      const outcome = await sendWebhook(this.#deps.outbound, target, { id: head.eventId, body: head.body }, config.WEBHOOK_TIMEOUT_MS);
      this.#logAttempt(head, outcome);
      this.#noteAttempt(head, outcome);
      if (outcome.kind === 'delivered') {
        head.state = 'delivered';
        head.deliveredAt = new Date();
        await em.flush();
        if (target.status !== 'verified') await webhookStore.setStatus(subscriptionId, apiKeyId, 'verified');
      } else if (outcome.kind === 'gone') {
        head.state = 'failed';
        await em.flush();
        await webhookStore.setStatus(subscriptionId, apiKeyId, 'disabled');
        await this.#failPending(em, apiKeyId, 'the webhook is disabled (it answered 410 Gone)');
        return;
      } else {
        const wait = config.WEBHOOK_RETRY_SCHEDULE[head.attempts];
        if (wait === undefined) {
          head.state = 'failed';
          await em.flush();
          await webhookStore.setStatus(subscriptionId, apiKeyId, 'unreachable');
          await this.#failPending(em, apiKeyId, 'the webhook failed for its whole retry schedule and is marked unreachable');
          return;
        }
        const seconds = Math.max(wait, Math.min(outcome.retryAfterSeconds ?? 0, MAX_RETRY_AFTER_SECONDS));
        head.nextAttemptAt = new Date(Date.now() + seconds * 1000);
        await em.flush();
        await this.#wake(subscriptionId, apiKeyId, head.nextAttemptAt);
        return;
      }
      await db.execute('update api_management_endpoint_lease set until = now() + make_interval(secs => ?) where api_key_id = ? and holder = ?', [
        config.WEBHOOK_TIMEOUT_MS / 1000 + 30,
        apiKeyId,
        holder,
      ]);
    }
    await this.#wake(subscriptionId, apiKeyId);
  }

  /** A sender for the endpoint, now or at `runAt`; a second wake-up for the same moment is dropped while the first waits. */
  async #wake(subscriptionId: string, apiKeyId: string, runAt?: Date): Promise<void> {
    const when = runAt ? { runAt, key: `${apiKeyId}@${runAt.toISOString()}` } : {};
    await this.#deps.jobs.enqueue(DELIVER_JOB, { subscriptionId, apiKeyId }, { ...when, subscriptionId });
  }

  #noteAttempt(delivery: WebhookDelivery, outcome: AttemptOutcome): void {
    const at = new Date();
    const error = outcome.kind === 'delivered' ? null : outcome.error;
    delivery.attempts += 1;
    delivery.lastAttemptAt = at;
    delivery.lastStatusCode = outcome.statusCode;
    delivery.lastError = error;
    delivery.attemptLog = [...delivery.attemptLog, { at: at.toISOString(), statusCode: outcome.statusCode, error, durationMs: outcome.durationMs }].slice(
      -ATTEMPT_LOG_LENGTH,
    );
  }

  #logAttempt(delivery: WebhookDelivery, outcome: AttemptOutcome): void {
    this.#deps.logger[outcome.kind === 'delivered' ? 'info' : 'warn'](
      {
        deliveryId: delivery.id,
        eventId: delivery.eventId,
        eventType: delivery.eventType,
        apiKeyId: delivery.apiKeyId,
        attempt: delivery.attempts + 1,
        outcome: outcome.kind,
        statusCode: outcome.statusCode,
        durationMs: outcome.durationMs,
        ...(outcome.kind === 'delivered' ? {} : { error: outcome.error }),
      },
      'webhook delivery attempt',
    );
  }

  async #failPending(em: ReturnType<Database['forkEm']>, apiKeyId: string, reason: string): Promise<void> {
    await em.nativeUpdate(WebhookDelivery, { apiKeyId, state: 'pending' }, { state: 'failed', lastError: reason });
  }
}
