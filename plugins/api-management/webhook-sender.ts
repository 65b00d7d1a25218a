import { createHmac } from 'node:crypto';
import type { Outbound } from 'rpc-service/plugin';

/** What a webhook receives: `{id, type, timestamp, subscriptionId, data}`. */
export interface WebhookEvent {
  id: string;
  type: string;
  timestamp: string;
  subscriptionId: string;
  data: unknown;
}

export type AttemptOutcome =
  | { kind: 'delivered'; statusCode: number; durationMs: number }
  /** 410 Gone: the receiver wants no more. */
  | { kind: 'gone'; statusCode: 410; error: string; durationMs: number }
  | { kind: 'failed'; statusCode: number | null; error: string; retryAfterSeconds: number | null; durationMs: number };

/**
 * The Standard Webhooks signature: `v1,` and the base64 HMAC-SHA256 of
 * `<id>.<timestamp>.<body>`, keyed with the UTF-8 bytes of the registered secret.
 */
export const signature = (secret: string, id: string, timestamp: number, body: string): string =>
  `v1,${createHmac('sha256', secret).update(`${id}.${timestamp}.${body}`).digest('base64')}`;

/** Retry-After as seconds from now: delta-seconds or an HTTP date; null when absent or unreadable. */
export function retryAfterSeconds(header: string | null, now = Date.now()): number | null {
  if (!header) return null;
  if (/^\d+$/.test(header.trim())) return Number(header.trim());
  const at = Date.parse(header);
  return Number.isNaN(at) ? null : Math.max(0, (at - now) / 1000);
}

/**
 * One POST of an event's body to a webhook, through the outbound guard, with
 * no redirect followed (a 3xx is a failure) and a time limit. The body is the
 * same on every attempt; the timestamp, and so the signature, are the attempt's.
 */
export async function sendWebhook(
  outbound: Outbound,
  target: { url: string; secret: string | null },
  message: { id: string; body: string },
  timeoutMs: number,
): Promise<AttemptOutcome> {
  const timestamp = Math.floor(Date.now() / 1000);
  const headers: Record<string, string> = {
    'content-type': 'application/json',
    'user-agent': 'rpc-service-webhooks/1',
    'webhook-id': message.id,
    'webhook-timestamp': String(timestamp),
  };
  if (target.secret !== null) {
    headers['webhook-signature'] = signature(target.secret, message.id, timestamp, message.body);
    headers['x-webhook-secret'] = target.secret;
  }
  const started = performance.now();
  const durationMs = () => Math.round(performance.now() - started);
  try {
    const response = await outbound.fetch(target.url, {
      method: 'POST',
      headers,
      body: message.body,
      maxRedirects: 0,
      signal: AbortSignal.timeout(timeoutMs),
    });
    // Only the status matters; the body is not read.
    await response.body?.cancel().catch(() => undefined);
    const { status } = response;
    if (status >= 200 && status < 300) return { kind: 'delivered', statusCode: status, durationMs: durationMs() };
    if (status === 410) return { kind: 'gone', statusCode: 410, error: 'the endpoint answered 410 Gone', durationMs: durationMs() };
    return {
      kind: 'failed',
      statusCode: status,
      error: status >= 300 && status < 400 ? `the endpoint answered ${status} (redirects are not followed)` : `the endpoint answered ${status}`,
      retryAfterSeconds: status === 429 || status === 503 ? retryAfterSeconds(response.headers.get('retry-after')) : null,
      durationMs: durationMs(),
    };
  } catch (error) {
    const err = error as Error & { cause?: Error };
    const reason = err.name === 'TimeoutError' ? `no answer within ${timeoutMs} ms` : err.cause?.message ? `${err.message}: ${err.cause.message}` : err.message;
    return { kind: 'failed', statusCode: null, error: reason, retryAfterSeconds: null, durationMs: durationMs() };
  }
}
