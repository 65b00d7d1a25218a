import * as v from 'valibot';
import { listParams, listSchema, recordId } from 'rpc-service/plugin';
import { defineJob, defineOperation } from './deps.ts';
import { DELIVERY_STATES } from './delivery.entity.ts';
import { DELIVERY_RECORD, REGISTER_RESULT } from './webhook.service.ts';

export const registerWebhook = defineOperation({
  access: 'user',
  kind: 'write',
  describe: 'Register the webhook of the API key you call with, and test it with a webhook.test event (2xx within 5 s: verified).',
  result: REGISTER_RESULT,
  params: v.object({
    webhookUrl: v.pipe(
      v.string('webhookUrl must be a string'),
      v.maxLength(2048, 'webhookUrl is too long'),
      v.url('webhookUrl must be an absolute URL'),
      v.regex(/^https?:\/\//i, 'webhookUrl must be http or https'),
    ),
    webhookSecret: v.optional(
      v.pipe(
        v.string('webhookSecret must be a string'),
        v.minLength(16, 'webhookSecret must be at least 16 characters'),
        v.maxLength(256, 'webhookSecret must be at most 256 characters'),
      ),
    ),
  }),
  handler: ({ params, ctx, deps }) => deps.webhookService.registerWebhook(ctx, { webhookUrl: params.webhookUrl, webhookSecret: params.webhookSecret ?? null }),
});

export const listApiKeysForWebhook = defineOperation({
  access: 'admin',
  kind: 'read',
  describe: "The subscription's API keys with a verified webhook, as {value: key id, label: description}.",
  result: v.array(v.strictObject({ value: v.string(), label: v.string() })),
  params: v.object({}),
  handler: ({ ctx, deps }) => deps.webhookStore.listApiKeysForWebhook(ctx),
});

const { page, pageSize } = listParams(25);

export const getDeliveries = defineOperation({
  access: 'admin',
  kind: 'read',
  describe: 'Webhook deliveries of the subscription, newest first, by API key and state (pending, delivered, failed), with their attempts.',
  result: listSchema(DELIVERY_RECORD),
  params: v.object({
    apiKeyId: v.optional(recordId('apiKeyId')),
    state: v.optional(v.picklist(DELIVERY_STATES, `state must be one of ${DELIVERY_STATES.join(', ')}`)),
    page,
    pageSize,
  }),
  handler: ({ params, ctx, deps }) => deps.webhookService.getDeliveries(ctx, params),
});

export const resendDeliveries = defineOperation({
  access: 'admin',
  kind: 'write',
  describe: 'Send the failed deliveries of a webhook again (all, or those in _ids), in order, with a fresh retry schedule.',
  result: v.strictObject({ resent: v.number() }),
  params: v.object({
    apiKeyId: recordId('apiKeyId'),
    _ids: v.optional(v.pipe(v.array(recordId('_ids[]')), v.minLength(1, '_ids must not be empty'), v.maxLength(1000, '_ids takes at most 1000 ids'))),
  }),
  handler: ({ params, ctx, deps }) => deps.webhookService.resendDeliveries(ctx, params),
});

export const deliver = defineJob({
  describe: "Sends an endpoint's due webhook deliveries, oldest first.",
  data: v.object({ subscriptionId: v.pipe(v.string(), v.uuid()), apiKeyId: v.pipe(v.string(), v.uuid()) }),
  handler: ({ data, deps }) => deps.webhookService.drain(data.subscriptionId, data.apiKeyId),
  concurrency: 4,
  timeoutSeconds: 600,
});

export const sweep = defineJob({
  describe: 'Hands endpoints with overdue deliveries to a sender again.',
  data: v.object({}),
  handler: ({ deps }) => deps.webhookService.sweep(),
  schedule: '* * * * *',
});
