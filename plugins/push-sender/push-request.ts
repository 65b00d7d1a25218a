import type { RequestDetails } from 'web-push';
import { onFirstUse, type Outbound, type PluginServices } from 'rpc-service/plugin';

/** web-push, loaded by the first push sent: a process that sends none does not carry it. */
const loadWebPush = onFirstUse(() => import('web-push'));

/** A browser subscribed to push, as the push plugin gives it. */
export type PushDevice = Awaited<ReturnType<PluginServices['pushService']['devices']>>[number];

export interface VapidDetails {
  subject: string;
  publicKey: string;
  privateKey: string;
}

export interface PushOptions {
  vapidDetails: VapidDetails;
  ttlSeconds: number;
  /** Push services replace a message still waiting for the device with a newer one of the same topic: a retried broadcast is not shown twice. */
  topic: string;
  timeoutMs: number;
  /** Aborted when the whole broadcast runs out of time. */
  signal: AbortSignal;
}

export type PushOutcome =
  | { kind: 'sent'; status: number }
  /** The push service no longer knows the device (RFC 8030 §7.3: 404 and 410). */
  | { kind: 'gone'; status: number }
  | { kind: 'failed'; status: number | null; error: string };

/**
 * One push message to one device: web-push encrypts it (aes128gcm, RFC 8291)
 * and signs the VAPID JWT; the request itself goes through the outbound
 * guard, which checks the endpoint's address like any other request made for
 * a tenant. Never throws: every failure is an outcome.
 */
export async function sendPush(outbound: Outbound, device: PushDevice, message: Buffer, options: PushOptions): Promise<PushOutcome> {
  const { default: webpush } = await loadWebPush();
  let request: RequestDetails;
  try {
    request = webpush.generateRequestDetails({ endpoint: device.endpoint, keys: { p256dh: device.p256dh, auth: device.auth } }, message, {
      vapidDetails: options.vapidDetails,
      contentEncoding: 'aes128gcm',
      TTL: options.ttlSeconds,
      topic: options.topic,
    });
  } catch (error) {
    return { kind: 'failed', status: null, error: `cannot encrypt for this device: ${(error as Error).message}` };
  }
  try {
    const response = await outbound.fetch(request.endpoint, {
      method: request.method,
      headers: request.headers,
      body: request.body,
      // A push service answers; it does not send the encrypted message elsewhere.
      maxRedirects: 0,
      signal: AbortSignal.any([AbortSignal.timeout(options.timeoutMs), options.signal]),
    });
    await response.body?.cancel().catch(() => undefined);
    const { status } = response;
    if (status >= 200 && status < 300) return { kind: 'sent', status };
    if (status === 404 || status === 410) return { kind: 'gone', status };
    return { kind: 'failed', status, error: `the push service answered ${status}` };
  } catch (error) {
    const err = error as Error & { cause?: Error };
    const reason =
      err.name === 'TimeoutError' ? `no answer within ${options.timeoutMs} ms` : err.cause?.message ? `${err.message}: ${err.cause.message}` : err.message;
    return { kind: 'failed', status: null, error: reason };
  }
}
