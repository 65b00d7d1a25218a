import { asClass } from 'awilix';
import { definePlugin } from 'rpc-service/plugin';
import * as v from 'valibot';
import { apiManagementSettings } from './config.ts';
import { WebhookDelivery } from './delivery.entity.ts';
import { DEPS, type ApiManagementDeps } from './deps.ts';
import { EndpointLease } from './endpoint-lease.entity.ts';
import { migrations } from './migrations/index.ts';
import { deliver, getDeliveries, listApiKeysForWebhook, registerWebhook, resendDeliveries, sweep } from './operations.ts';
import { ApiKeyWebhook } from './webhook.entity.ts';
import { WebhookStore } from './webhook-store.ts';
import { WEBHOOK_TEST, WebhookService } from './webhook.service.ts';

/** ApiManagementRpc: webhooks of API keys, and signed, durable, ordered delivery of the subscription's events to them. */
export const apiManagementPlugin = definePlugin<ApiManagementDeps>({
  id: 'api-management',
  group: 'ApiManagementRpc',
  coreVersion: '^2.0.0',
  config: apiManagementSettings,
  deps: DEPS,
  entities: [ApiKeyWebhook, WebhookDelivery, EndpointLease],
  migrations,
  services: { webhookService: asClass(WebhookService).singleton(), webhookStore: asClass(WebhookStore).singleton() },
  extends: {
    'core.events': [
      {
        name: WEBHOOK_TEST,
        describe: 'Sent by registerWebhook to the webhook being registered only: {apiKeyId, message}.',
        payload: v.strictObject({ apiKeyId: v.string(), message: v.string() }),
      },
    ],
    // ApiKeyRpc's records show a key's webhook (plugins/api-key/README.md lists those fields on the key).
    'api-key.recordFields': (deps) => [{ fields: (subscriptionId, apiKeyIds) => deps.webhookStore.recordFields(subscriptionId, apiKeyIds) }],
  },
  subscribers: { '*': (event, { webhookService }) => webhookService.onEvent(event) },
  operations: { registerWebhook, listApiKeysForWebhook, getDeliveries, resendDeliveries },
  jobs: { deliver, sweep },
  start: async ({ webhookStore }) => void (await webhookStore.resealLegacy()),
});
