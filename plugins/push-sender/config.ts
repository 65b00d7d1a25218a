import { isIP } from 'node:net';
import * as v from 'valibot';
import { env, isPublicAddress, setting, settings } from 'rpc-service/plugin';

/** `user@domain` after `mailto:`: one address, no query (`?subject=`), no spaces. */
const MAILTO = /^mailto:[^\s@?#/]+@([^\s@?#/]+)$/i;

/**
 * Push services contact the sender at the VAPID subject, and some (Apple's)
 * refuse a JWT whose subject is local: the host must be a public name (with a
 * dot, not localhost or *.localhost) or a public address.
 */
function isPublicHost(hostname: string): boolean {
  const host = hostname
    .replace(/^\[(.*)\]$/, '$1')
    .replace(/\.$/, '')
    .toLowerCase();
  if (isIP(host)) return isPublicAddress(host);
  return host.includes('.') && !host.endsWith('.localhost');
}

/** An https URL or a mailto: address, at a public host. */
export function isVapidSubject(subject: string): boolean {
  const mailHost = MAILTO.exec(subject)?.[1];
  if (mailHost === undefined && !/^https:\/\//i.test(subject)) return false;
  try {
    // Read as a URL's host, so that 127.1 or 0x7f.0.0.1 are seen for the loopback addresses they are.
    return isPublicHost(new URL(mailHost === undefined ? subject : `https://${mailHost}/`).hostname);
  } catch {
    return false;
  }
}

export const pushSenderSettings = settings({
  PUSH_VAPID_SUBJECT: setting(
    (name) =>
      v.pipe(
        v.string(),
        v.trim(),
        v.check(
          isVapidSubject,
          `${name} must be an https: URL or a mailto: address at a public host (not localhost or a loopback or private address), e.g. mailto:push@example.com`,
        ),
      ),
    'how push services reach the sender (VAPID "sub"): an https: URL or a mailto: address; unset: PushSenderRpc.sendBroadcast answers FEATURE_UNAVAILABLE',
  ),
  PUSH_SEND_CONCURRENCY: setting(env.integer(1, 200), 'push requests one broadcast has under way at once', '10'),
  PUSH_SEND_TIMEOUT_MS: setting(env.integer(100, 120_000), 'a push request not answered within this fails (the device is counted failed)', '10000'),
  PUSH_TTL_SECONDS: setting(
    env.integer(0, 2_419_200),
    'how long a push service keeps a broadcast for a device that is offline (TTL header; 0: deliver now or never)',
    '86400',
  ),
});

export type PushSenderConfig = v.InferOutput<typeof pushSenderSettings>;
