import * as v from 'valibot';
import { defineOperation } from './deps.ts';

const key = (label: string) => v.pipe(v.string(`${label} must be a string`), v.regex(/^[A-Za-z0-9_-]+={0,2}$/, `${label} must be base64url`), v.maxLength(200));
const subscriptionObject = v.object(
  {
    endpoint: v.pipe(v.string('endpoint must be a string'), v.url('endpoint must be a URL'), v.maxLength(2000)),
    keys: v.object({ p256dh: key('keys.p256dh'), auth: key('keys.auth') }, 'keys must hold p256dh and auth'),
  },
  'subscriptionObject must be an object',
);

export const getVapidPublicKey = defineOperation({
  access: 'user',
  kind: 'read',
  describe: "The service's VAPID public key, for the browser's pushManager.subscribe (applicationServerKey).",
  result: v.strictObject({ publicKey: v.string() }),
  params: v.object({}),
  handler: ({ deps }) => deps.pushService.getVapidPublicKey(),
});

export const subscribe = defineOperation({
  access: 'user',
  kind: 'write',
  describe: "Subscribe the caller's browser (a PushSubscription's endpoint and keys) on channels (['default'] by default).",
  result: v.strictObject({ success: v.literal(true) }),
  params: v.object({
    subscriptionObject,
    channels: v.optional(
      v.pipe(
        v.array(
          v.pipe(v.string('channels must be strings'), v.trim(), v.minLength(1, 'a channel must not be empty'), v.maxLength(100)),
          'channels must be an array of strings',
        ),
        v.minLength(1, 'channels must name at least one channel'),
        v.maxLength(50, 'at most 50 channels'),
        v.transform((list) => [...new Set(list)]),
      ),
      ['default'],
    ),
  }),
  handler: ({ params, ctx, deps }) => deps.pushService.subscribe(ctx, params.subscriptionObject, params.channels),
});

export const unsubscribe = defineOperation({
  access: 'user',
  kind: 'write',
  describe: "Remove the caller's push subscription with this endpoint (the keys are not used).",
  result: v.strictObject({ success: v.literal(true) }),
  params: v.object({ subscriptionObject }),
  handler: ({ params, ctx, deps }) => deps.pushService.unsubscribe(ctx, params.subscriptionObject.endpoint),
});
