import { randomUUID } from 'node:crypto';
import { conflict, onFirstUse, pgArray, validationError, type AuthenticatedContext, type Database, type Keyring, type Outbound } from 'rpc-service/plugin';
import { PushSubscription } from './subscription.entity.ts';

/** web-push, loaded when the service's VAPID keys are first made: an installation that has them does not carry it. */
const loadWebPush = onFirstUse(() => import('web-push'));

export interface SubscriptionObject {
  endpoint: string;
  keys: { p256dh: string; auth: string };
}

/** A browser subscribed to push, as a sender needs it: whose it is, where to send and the keys to encrypt for. */
export interface PushDevice {
  id: string;
  userId: string;
  endpoint: string;
  p256dh: string;
  auth: string;
}

/**
 * The keyring's data key for the service's own values (no subscription's):
 * like every data key it is wrapped by the master key and turns over with it.
 */
export const SERVICE_KEYRING_ID = '00000000-0000-0000-0000-000000000000';

/**
 * Web push subscriptions of a subscription's users, and the service's VAPID
 * keys: made once (the first node to need them wins), the private key kept
 * sealed by the keyring, the public key given to browsers.
 */
export class PushService {
  readonly #db: Database;
  readonly #keyring: Keyring;
  readonly #outbound: Outbound;
  #publicKey?: Promise<string>;

  constructor({ db, keyring, outbound }: { db: Database; keyring: Keyring; outbound: Outbound }) {
    this.#db = db;
    this.#keyring = keyring;
    this.#outbound = outbound;
  }

  getVapidPublicKey(): Promise<{ publicKey: string }> {
    this.#publicKey ??= this.vapidKeys().then((keys) => keys.publicKey);
    this.#publicKey.catch(() => (this.#publicKey = undefined));
    return this.#publicKey.then((publicKey) => ({ publicKey }));
  }

  /**
   * Subscribes the caller's browser on the channels given. The same browser
   * again in this subscription (same endpoint and auth secret) moves it to
   * the caller and those channels; the endpoint with another secret is
   * refused, so knowing a device's endpoint is not enough to take it over.
   * Endpoints are unique per subscription: what another tenant subscribed
   * neither blocks nor shows here.
   */
  async subscribe(ctx: AuthenticatedContext, subscription: SubscriptionObject, channels: string[]): Promise<{ success: true }> {
    this.#checkEndpoint(subscription.endpoint);
    checkKeys(subscription.keys);
    const saved = await ctx.em.execute<{ id: string }[]>(
      `insert into push_subscription (id, subscription_id, user_id, endpoint, p256dh, auth, channels, created_at, updated_at)
       values (?, ?, ?, ?, ?, ?, ?::text[], now(), now())
       on conflict (subscription_id, endpoint) do update set user_id = excluded.user_id, p256dh = excluded.p256dh, channels = excluded.channels, updated_at = now()
       where push_subscription.auth = excluded.auth
       returning id`,
      [randomUUID(), ctx.subscriptionId, ctx.userId, subscription.endpoint, subscription.keys.p256dh, subscription.keys.auth, pgArray(channels)],
    );
    if (saved.length === 0) throw conflict('This endpoint is subscribed with another auth secret; subscribe the browser anew to get a new endpoint');
    return { success: true };
  }

  /** Removes the caller's subscription with this endpoint (none: nothing to do). */
  async unsubscribe(ctx: AuthenticatedContext, endpoint: string): Promise<{ success: true }> {
    await ctx.em.nativeDelete(PushSubscription, { endpoint, userId: ctx.userId });
    return { success: true };
  }

  /** The devices of these users of a subscription; with channels, only those on at least one of them. */
  async devices(subscriptionId: string, userIds: readonly string[], channels?: readonly string[]): Promise<PushDevice[]> {
    if (userIds.length === 0) return [];
    const channelList = channels ? pgArray(channels) : null;
    const rows = await this.#db.execute<{ id: string; user_id: string; endpoint: string; p256dh: string; auth: string }>(
      `select id, user_id, endpoint, p256dh, auth from push_subscription
       where subscription_id = ? and user_id = any(?::uuid[]) and (?::text[] is null or channels && ?::text[])
       order by user_id, created_at, id`,
      [subscriptionId, pgArray(userIds), channelList, channelList],
    );
    return rows.map((row) => ({ id: row.id, userId: row.user_id, endpoint: row.endpoint, p256dh: row.p256dh, auth: row.auth }));
  }

  /** Forgets a device whose push service answered that it is gone (404, 410). */
  async removeDevice(subscriptionId: string, id: string): Promise<void> {
    await this.#db.forkEm(subscriptionId).nativeDelete(PushSubscription, { id });
  }

  /** A push endpoint is an https URL the outbound guard would send to (http is allowed where the operator allows private addresses). */
  #checkEndpoint(endpoint: string): void {
    try {
      this.#outbound.check(endpoint);
    } catch (error) {
      throw validationError([{ path: 'subscriptionObject.endpoint', message: (error as Error).message }]);
    }
  }

  /** The service's VAPID key pair (made on first need), for PushSenderRpc to sign its requests with. */
  async vapidKeys(): Promise<{ publicKey: string; privateKey: string }> {
    const read = async () =>
      (
        await this.#db.execute<{ public_key: string; private_key_sealed: string }>('select public_key, private_key_sealed from push_vapid_keys where id = 1')
      )[0];
    let row = await read();
    if (!row) {
      const keys = (await loadWebPush()).default.generateVAPIDKeys();
      await this.#db.execute(
        'insert into push_vapid_keys (id, public_key, private_key_sealed, created_at) values (1, ?, ?, now()) on conflict (id) do nothing',
        [keys.publicKey, await this.#keyring.seal(SERVICE_KEYRING_ID, keys.privateKey)],
      );
      row = await read();
    }
    return { publicKey: row!.public_key, privateKey: await this.#keyring.open(SERVICE_KEYRING_ID, row!.private_key_sealed) };
  }
}

/**
 * The keys a sender encrypts for (RFC 8291): p256dh an uncompressed P-256
 * point, auth a 16-byte secret. Anything else could never be sent to, so it
 * is refused here rather than failing every broadcast.
 */
function checkKeys(keys: SubscriptionObject['keys']): void {
  const p256dh = Buffer.from(keys.p256dh, 'base64url');
  if (p256dh.length !== 65 || p256dh[0] !== 0x04) {
    throw validationError([{ path: 'subscriptionObject.keys.p256dh', message: 'keys.p256dh must be an uncompressed P-256 public key (65 bytes, base64url)' }]);
  }
  if (Buffer.from(keys.auth, 'base64url').length !== 16) {
    throw validationError([{ path: 'subscriptionObject.keys.auth', message: 'keys.auth must be a 16-byte secret (base64url)' }]);
  }
}
