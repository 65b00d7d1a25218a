import { defineEntity, type InferEntity } from 'rpc-service/plugin';

/** `verified`: events are delivered; `unreachable`: its test or a whole retry schedule failed; `disabled`: it answered 410 Gone. */
export type WebhookStatus = 'verified' | 'unreachable' | 'disabled';

/**
 * The webhook of an API key (the api-key plugin's), one at most per key. A
 * row of a key that no longer exists, or is disabled, is ignored: the key's
 * state is read from the api-key plugin at each use.
 */
export const ApiKeyWebhook = defineEntity({
  name: 'ApiKeyWebhook',
  tableName: 'api_management_webhook',
  properties: (p) => ({
    subscriptionId: p.uuid().primary(),
    apiKeyId: p.uuid().primary(),
    url: p.text(),
    /** Sealed by the keyring under the subscription's data key. */
    secret: p.text().nullable(),
    status: p.text().$type<WebhookStatus>(),
    /** When it was registered (and tested). */
    lastTestedAt: p.datetime(),
  }),
  indexes: [{ properties: ['subscriptionId', 'status'] }],
});
export type ApiKeyWebhook = InferEntity<typeof ApiKeyWebhook>;
