import * as v from 'valibot';
import { env, setting, settings } from 'rpc-service/plugin';

const UNIT_SECONDS: Record<string, number> = { ms: 0.001, s: 1, m: 60, h: 3600 };

/** `0,5s,5m,30m,2h` → seconds; a bare number is seconds. */
const durations = (name: string) =>
  v.pipe(
    v.string(),
    v.transform((text) => text.split(',').map((item) => item.trim())),
    v.check((items) => items.length > 0 && items.every((item) => /^\d+(\.\d+)?(ms|s|m|h)?$/.test(item)), `${name} must be durations such as 0,5s,5m,2h`),
    v.transform((items) =>
      items.map((item) => {
        const [, amount, unit] = /^(\d+(?:\.\d+)?)(ms|s|m|h)?$/.exec(item)!;
        return Number(amount) * UNIT_SECONDS[unit ?? 's']!;
      }),
    ),
  );

export const apiManagementSettings = settings({
  WEBHOOK_RETRY_SCHEDULE: setting(
    durations,
    'wait before each delivery attempt of a webhook event: the first attempt, then each retry',
    '0,5s,5m,30m,2h,5h,10h,10h',
  ),
  WEBHOOK_TIMEOUT_MS: setting(env.integer(100, 120_000), 'a delivery attempt not answered within this fails', '15000'),
  WEBHOOK_TEST_TIMEOUT_MS: setting(env.integer(100, 60_000), 'registerWebhook verifies the URL when its test event is answered with 2xx within this', '5000'),
  WEBHOOK_DELIVERY_RETENTION_DAYS: setting(env.integer(1, 3650), 'delivered and failed webhook deliveries are deleted after this many days', '30'),
});

export type ApiManagementConfig = v.InferOutput<typeof apiManagementSettings>;
