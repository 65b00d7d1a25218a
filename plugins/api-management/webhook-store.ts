import {
  pgArray,
  preparedRead,
  rowTimestamp,
  type AuthenticatedContext,
  type Database,
  type Keyring,
  type PluginServices,
  type Principal,
  type RowOf,
  type SecretBox,
} from 'rpc-service/plugin';
import { ApiKeyWebhook, type WebhookStatus } from './webhook.entity.ts';

const SECRET_MASK = '********';

/** Where a key's webhook goes: the current URL and secret (opened), and whom the key stands for now, read at each delivery. */
export interface WebhookTarget {
  apiKeyId: string;
  /** The key's principal as authenticating with it would give now (its owner's role, its scopes): what a delivery is checked against. */
  principal: Principal;
  url: string;
  secret: string | null;
  status: WebhookStatus;
}

interface Deps {
  db: Database;
  keyring: Keyring;
  secretBox: SecretBox;
  apiKeyService: PluginServices['apiKeyService'];
}

/** A key's webhook fields for its record; the secret only as whether there is one (an empty one counts as none, as before). */
const WEBHOOK_FIELDS = preparedRead(
  'api_management_webhook_fields',
  "select api_key_id, url, coalesce(secret, '') <> '' as has_secret, status, last_tested_at " +
    'from api_management_webhook where subscription_id = $1 and api_key_id = any($2::uuid[])',
);

type WebhookFieldsRow = RowOf<ApiKeyWebhook, 'apiKeyId' | 'url' | 'status' | 'lastTestedAt'> & { has_secret: boolean };

/**
 * The webhooks of API keys, in this plugin's table. Which keys exist, whose
 * they are and whether they are enabled is the api-key plugin's
 * (`apiKeyService.keysById`), read at each use, so a removed or disabled
 * key's webhook receives nothing.
 */
export class WebhookStore {
  readonly #deps: Deps;

  constructor(deps: Deps) {
    this.#deps = deps;
  }

  /** Stores the webhook of the caller's API key (URL, secret sealed, the outcome of its test). */
  async registerWebhook(ctx: AuthenticatedContext, apiKeyId: string, webhook: { url: string; secret: string | null; status: WebhookStatus }): Promise<boolean> {
    if ((await this.#deps.apiKeyService.keysById(ctx.subscriptionId, [apiKeyId])).length === 0) return false;
    const secret = webhook.secret === null ? null : await this.#deps.keyring.seal(ctx.subscriptionId, webhook.secret);
    await ctx.em.upsert(ApiKeyWebhook, {
      apiKeyId,
      subscriptionId: ctx.subscriptionId,
      url: webhook.url,
      secret,
      status: webhook.status,
      lastTestedAt: new Date(),
    });
    return true;
  }

  /**
   * Keys of a subscription with a verified webhook, sorted by key id, each
   * with the principal it stands for now (an enabled key of an active user):
   * who may receive its events, and with what rights (no secret is opened).
   */
  async recipients(subscriptionId: string): Promise<{ apiKeyId: string; principal: Principal }[]> {
    const webhooks = await this.#deps.db.forkEm(subscriptionId).find(ApiKeyWebhook, { status: 'verified' }, { fields: ['apiKeyId'] });
    const principals = await this.#deps.apiKeyService.principalsOf(
      subscriptionId,
      webhooks.map((webhook) => webhook.apiKeyId),
    );
    return [...principals]
      .map(([apiKeyId, principal]) => ({ apiKeyId, principal }))
      .sort((a, b) => (a.apiKeyId < b.apiKeyId ? -1 : a.apiKeyId > b.apiKeyId ? 1 : 0));
  }

  /**
   * Where a key's webhook goes now, whatever its status, with its secret
   * opened and the principal the key stands for now; null without a webhook,
   * or when the key is disabled or gone or its owner deactivated or gone.
   */
  async target(subscriptionId: string, apiKeyId: string): Promise<WebhookTarget | null> {
    const webhook = await this.#deps.db.forkEm(subscriptionId).findOne(ApiKeyWebhook, { apiKeyId });
    if (!webhook) return null;
    const principal = (await this.#deps.apiKeyService.principalsOf(subscriptionId, [apiKeyId])).get(apiKeyId);
    if (!principal) return null;
    return {
      apiKeyId,
      principal,
      url: webhook.url,
      secret: webhook.secret ? await this.#deps.keyring.open(subscriptionId, webhook.secret) : null,
      status: webhook.status,
    };
  }

  async setStatus(subscriptionId: string, apiKeyId: string, status: WebhookStatus): Promise<void> {
    await this.#deps.db.forkEm(subscriptionId).nativeUpdate(ApiKeyWebhook, { apiKeyId }, { status });
  }

  /** `{value: key id, label: description}` of the subscription's enabled keys with a verified webhook, oldest key first. */
  async listApiKeysForWebhook(ctx: AuthenticatedContext): Promise<{ value: string; label: string }[]> {
    const keys = await this.#enabledKeysWithVerifiedWebhooks(ctx.subscriptionId);
    return keys.map((key) => ({ value: key.id, label: key.description }));
  }

  /**
   * The webhook fields of ApiKeyRpc's records (`api-key.recordFields`); the secret is the caller's own, but never leaves the
   * service again. A prepared read, as the list it joins (ApiKeyRpc.getData is a hot read).
   */
  async recordFields(subscriptionId: string, apiKeyIds: readonly string[]) {
    if (apiKeyIds.length === 0) return new Map();
    const webhooks = await this.#deps.db.read<WebhookFieldsRow>(WEBHOOK_FIELDS, [subscriptionId, pgArray(apiKeyIds)]);
    return new Map(
      webhooks.map((webhook) => {
        const testedAt = rowTimestamp(webhook.last_tested_at).toISOString();
        return [
          webhook.api_key_id,
          {
            webhookUrl: webhook.url,
            webhookSecret: webhook.has_secret ? SECRET_MASK : null,
            webhookStatus: webhook.status,
            lastTestedAt: testedAt,
            updatedAt: testedAt,
          },
        ];
      }),
    );
  }

  /**
   * Secrets sealed before the keyring were sealed by the master key itself,
   * which a master-key rotation would leave unreadable: seal them again under
   * their subscription's data key. Each row changes only if it is as read.
   */
  async resealLegacy(): Promise<number> {
    const { db, keyring, secretBox } = this.#deps;
    const rows = await db.execute<RowOf<ApiKeyWebhook, 'apiKeyId' | 'subscriptionId'> & { secret: string }>(
      `select api_key_id, subscription_id, secret from api_management_webhook where secret not like 'k1.%'`,
    );
    for (const row of rows) {
      await db.execute('update api_management_webhook set secret = ? where subscription_id = ? and api_key_id = ? and secret = ?', [
        await keyring.seal(row.subscription_id, secretBox.decrypt(row.secret)),
        row.subscription_id,
        row.api_key_id,
        row.secret,
      ]);
    }
    return rows.length;
  }

  async #enabledKeysWithVerifiedWebhooks(subscriptionId: string) {
    const webhooks = await this.#deps.db.forkEm(subscriptionId).find(ApiKeyWebhook, { status: 'verified' }, { fields: ['apiKeyId'] });
    const keys = await this.#deps.apiKeyService.keysById(
      subscriptionId,
      webhooks.map((webhook) => webhook.apiKeyId),
    );
    return keys.filter((key) => key.isEnabled);
  }
}
