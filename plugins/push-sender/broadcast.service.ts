import { counted, RpcError, validationError, type AuthenticatedContext, type Deps, type JobRun, type RequestContext } from 'rpc-service/plugin';
import { pushMessage, type Broadcast } from './broadcast.ts';
import type { PushSenderConfig } from './config.ts';
import { sendPush, type PushDevice } from './push-request.ts';

/** The services a broadcast uses: the plugin's DEPS (deps.ts), which are checked to be these. */
export type BroadcastNeeds = readonly ['jobs', 'notificationService', 'outbound', 'pushService', 'userService'];
type BroadcastDeps = Deps<BroadcastNeeds, Record<never, never>, PushSenderConfig>;

/** Who a broadcast is for: the users notified in the app, and the devices pushed to (theirs). */
interface Audience {
  userIds: string[];
  devices: PushDevice[];
}

/** What the job did, kept as its output and logged. */
interface DeliveryReport {
  devices: number;
  sent: number;
  /** Devices their push service said are gone (404, 410), deleted. */
  removed: number;
  failed: number;
}

/** The notification's source: this plugin. */
const SOURCE = 'push-sender';
const LISTED_UNKNOWN_IDS = 10;

/** Runs `work` on every item, at most `limit` at a time. */
async function forEachConcurrently<T>(items: readonly T[], limit: number, work: (item: T) => Promise<void>): Promise<void> {
  let next = 0;
  const worker = async () => {
    while (next < items.length) await work(items[next++]!);
  };
  await Promise.all(Array.from({ length: Math.min(limit, items.length) }, worker));
}

/**
 * Broadcasts of a subscription to its users' browsers: sendBroadcast checks
 * the audience within the caller's subscription and queues the `broadcast`
 * job, which notifies the users in the app and pushes to their devices.
 */
export class BroadcastService {
  readonly #deps: BroadcastDeps;

  constructor(deps: BroadcastDeps) {
    this.#deps = deps;
  }

  async sendBroadcast(ctx: AuthenticatedContext, broadcast: Broadcast): Promise<{ message: string }> {
    this.#requireVapidSubject();
    checkTargets(broadcast);
    const audience = await this.#audience(ctx.subscriptionId, broadcast);
    if (broadcast.targetType === 'users') {
      const found = new Set(audience.userIds);
      const unknown = broadcast.targetIds!.filter((id) => !found.has(id.toLowerCase()));
      if (unknown.length > 0) {
        const listed =
          unknown.slice(0, LISTED_UNKNOWN_IDS).join(', ') + (unknown.length > LISTED_UNKNOWN_IDS ? ` and ${unknown.length - LISTED_UNKNOWN_IDS} more` : '');
        throw validationError([{ path: 'targetIds', message: `not active users of this subscription: ${listed}` }]);
      }
    }
    if (audience.userIds.length > 0) await this.#deps.jobs.enqueue('broadcast', broadcast, { ctx });
    const reached = new Set(audience.devices.map((device) => device.userId)).size;
    return {
      message: `Broadcast initiated: ${counted(reached, 'user')} reached on ${counted(audience.devices.length, 'device')}, ${counted(audience.userIds.length, 'user')} notified in the app`,
    };
  }

  /**
   * The `broadcast` job: the audience again (devices may have come or gone
   * since it was queued), the in-app notifications, then one push per device,
   * `PUSH_SEND_CONCURRENCY` at a time. Only the steps before the first push can
   * throw (and the job be retried); a device's failure is counted and logged.
   */
  async deliver(ctx: RequestContext, broadcast: Broadcast, job: JobRun): Promise<DeliveryReport> {
    const { config, notificationService, outbound, pushService } = this.#deps;
    const subscriptionId = ctx.subscriptionId;
    if (!subscriptionId) throw new Error('a broadcast runs for the caller who sent it, and this job has none');
    const subject = this.#requireVapidSubject();
    const [vapidKeys, audience] = await Promise.all([pushService.vapidKeys(), this.#audience(subscriptionId, broadcast)]);
    const { title, body, url } = broadcast.payload;
    // A retried job (a node stopped mid-send) notifies nobody twice.
    await notificationService.notify({
      subscriptionId,
      userIds: audience.userIds,
      title,
      message: body,
      source: SOURCE,
      data: { url: url ?? null },
      dedupeKey: `broadcast:${job.id}`,
    });

    const message = pushMessage(broadcast.payload);
    const options = {
      vapidDetails: { subject, ...vapidKeys },
      ttlSeconds: config.PUSH_TTL_SECONDS,
      topic: job.id.replaceAll('-', ''),
      timeoutMs: config.PUSH_SEND_TIMEOUT_MS,
      signal: job.signal,
    };
    const report: DeliveryReport = { devices: audience.devices.length, sent: 0, removed: 0, failed: 0 };
    await forEachConcurrently(audience.devices, config.PUSH_SEND_CONCURRENCY, async (device) => {
      const outcome = await sendPush(outbound, device, message, options);
      if (outcome.kind === 'sent') {
        report.sent++;
        return;
      }
      // Which device and where, never the message or the device's keys.
      const logged = { broadcastId: job.id, deviceId: device.id, userId: device.userId, host: new URL(device.endpoint).host, status: outcome.status };
      if (outcome.kind === 'failed') {
        report.failed++;
        ctx.log.warn({ ...logged, error: outcome.error }, 'push failed');
        return;
      }
      try {
        await pushService.removeDevice(subscriptionId, device.id);
        report.removed++;
        ctx.log.info(logged, 'push device gone, removed');
      } catch (err) {
        report.failed++;
        ctx.log.warn({ ...logged, err }, 'push device gone, but could not be removed');
      }
    });
    ctx.log.info({ broadcastId: job.id, targetType: broadcast.targetType, users: audience.userIds.length, ...report }, 'push broadcast delivered');
    return report;
  }

  /** The configured subject; without one push services would refuse every request, so nothing is sent. */
  #requireVapidSubject(): string {
    const subject = this.#deps.config.PUSH_VAPID_SUBJECT;
    if (!subject) {
      throw new RpcError(
        'FEATURE_UNAVAILABLE',
        'Push broadcasts are not configured: the operator sets PUSH_VAPID_SUBJECT to an https: URL or a mailto: address where push services can reach the sender',
      );
    }
    return subject;
  }

  /** Everything within the subscription, and only its active users: all of them, those listed, or those with a device on a listed channel. */
  async #audience(subscriptionId: string, { targetType, targetIds }: Broadcast): Promise<Audience> {
    const { userService, pushService } = this.#deps;
    if (targetType === 'channels') {
      const devices = await pushService.devices(subscriptionId, await userService.activeUserIds(subscriptionId), targetIds);
      return { userIds: [...new Set(devices.map((device) => device.userId))], devices };
    }
    const userIds = await userService.activeUserIds(subscriptionId, targetType === 'users' ? targetIds : undefined);
    return { userIds, devices: await pushService.devices(subscriptionId, userIds) };
  }
}

/** targetIds name at least one user or channel for those types; with all they are not used, so not required. */
function checkTargets({ targetType, targetIds = [] }: Broadcast): void {
  if (targetType !== 'all' && targetIds.length === 0) {
    throw validationError([
      { path: 'targetIds', message: `targetIds must name at least one ${targetType === 'users' ? 'user id' : 'channel'} when targetType is ${targetType}` },
    ]);
  }
}
