import * as v from 'valibot';
import { stringList, trimmedText } from 'rpc-service/plugin';

/**
 * The largest push message, in bytes of its JSON. A push service need accept
 * no more than 4096 bytes of body (RFC 8030 §7.2), sent as a single
 * aes128gcm record (RFC 8291 §4): web-push writes the header (16-byte salt,
 * 4-byte record size, 1-byte key id length, the 65-byte public key: 86
 * bytes), then the plaintext, the padding delimiter (1 byte, no padding) and
 * the AES-GCM tag (16 bytes), so 4096 - 86 - 1 - 16 = 3993.
 */
export const MAX_PUSH_MESSAGE_BYTES = 3993;
export const MAX_TARGET_IDS = 1000;

/** What a device's service worker receives (`event.data.json()`): the bytes the size limit is measured on. */
export const pushMessage = ({ title, body, url }: { title: string; body: string; url?: string }): Buffer => Buffer.from(JSON.stringify({ title, body, url }));

/**
 * Where a click leads: an http(s) URL, or a path of the site the service
 * worker belongs to. `//host` and `/\host` are refused, as browsers read
 * both as another host; so is whitespace, which they strip first.
 */
const isClickUrl = (url: string): boolean => (url.startsWith('/') ? /^\/(?![/\\])[^\s\\]*$/.test(url) : /^https?:\/\/\S+$/i.test(url) && URL.canParse(url));

const payload = v.pipe(
  v.object(
    {
      title: trimmedText('payload.title', 200),
      body: trimmedText('payload.body', MAX_PUSH_MESSAGE_BYTES),
      url: v.optional(
        v.pipe(
          v.string('payload.url must be a string'),
          v.maxLength(2048, 'payload.url must be at most 2048 characters'),
          v.check(isClickUrl, 'payload.url must be an http(s) URL or a path starting with a single /'),
        ),
      ),
    },
    'payload must be an object with title and body',
  ),
  v.check(
    (message) => pushMessage(message).length <= MAX_PUSH_MESSAGE_BYTES,
    (issue) =>
      `payload is ${pushMessage(issue.input).length} bytes as JSON; a push message holds at most ${MAX_PUSH_MESSAGE_BYTES} (title, body and url together)`,
  ),
);

/** sendBroadcast's params, and the data of the job that sends it. */
export const broadcastParams = v.object({
  targetType: v.picklist(['all', 'users', 'channels'], 'targetType must be all, users or channels'),
  /** User ids for users, channel names for channels; the audience rules are checked against the database by the service. */
  targetIds: v.optional(stringList('targetIds', { maxItems: MAX_TARGET_IDS, maxLength: 100 })),
  payload,
});

export type Broadcast = v.InferOutput<typeof broadcastParams>;
