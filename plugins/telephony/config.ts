import * as v from 'valibot';
import { env, setting, settings, splitList } from 'rpc-service/plugin';

/** Digits of one extension at most: the longest number E.164 allows. */
export const MAX_EXTENSION_DIGITS = 15;
/** Extensions a local pool holds at most: getAvailableExtensions answers them all at once. */
export const MAX_POOL_SIZE = 10_000;

/** One extension: a string of digits. */
export const EXTENSION = new RegExp(`^\\d{1,${MAX_EXTENSION_DIGITS}}$`);

export type TelephonyConfig =
  { provider: null } | { provider: 'local'; extensions: readonly string[] } | { provider: 'http'; apiUrl: string; apiKey: string; timeoutMs: number };

/**
 * The pool `TELEPHONY_EXTENSIONS` describes: extensions and ranges such as
 * `100-199,300`, each number of a range written with as many digits as its
 * start (`0100-0199` keeps the zero). Duplicates are dropped, the order kept.
 */
export function parsePool(text: string): { extensions: string[] } | { problem: string } {
  const pool = new Set<string>();
  for (const item of splitList(text)) {
    const [start, end, ...rest] = item.split('-').map((part) => part.trim());
    if (rest.length > 0 || !EXTENSION.test(start!) || (end !== undefined && !EXTENSION.test(end))) {
      return { problem: `TELEPHONY_EXTENSIONS: "${item}" is neither an extension (1 to ${MAX_EXTENSION_DIGITS} digits) nor a range of them like 100-199` };
    }
    const first = Number(start);
    const last = end === undefined ? first : Number(end);
    if (last < first) return { problem: `TELEPHONY_EXTENSIONS: the range ${item} ends before it starts` };
    // Counted before anything is made, so a range of a billion numbers is refused, not expanded.
    if (pool.size + (last - first + 1) > MAX_POOL_SIZE) return { problem: `TELEPHONY_EXTENSIONS holds more than ${MAX_POOL_SIZE} extensions` };
    for (let number = first; number <= last; number++) pool.add(String(number).padStart(start!.length, '0'));
  }
  return pool.size > 0 ? { extensions: [...pool] } : { problem: 'TELEPHONY_EXTENSIONS names no extension' };
}

/** Settings that belong to each provider, so that one set for another provider (or for none) is caught at start. */
const SETTINGS_OF = { local: ['TELEPHONY_EXTENSIONS'], http: ['TELEPHONY_API_URL', 'TELEPHONY_API_KEY'] } as const;

/** The URL, or null for text that is not one (valibot runs every check of a pipe, so each must take any text). */
const urlOf = (text: string): URL | null => (URL.canParse(text) ? new URL(text) : null);

export const telephonySettings = v.pipe(
  settings({
    TELEPHONY_PROVIDER: setting(
      (name) => v.picklist(['local', 'http'], `${name} must be local or http (or unset: no telephony)`),
      'local: an extension pool of this service (TELEPHONY_EXTENSIONS); http: an external platform (TELEPHONY_API_URL, TELEPHONY_API_KEY); unset: TelephonyManagerRpc answers FEATURE_UNAVAILABLE',
    ),
    TELEPHONY_EXTENSIONS: setting(
      v.string(),
      "the local provider's extensions, each subscription's own numbering plan: comma-separated extensions and ranges, e.g. 100-199,300",
    ),
    TELEPHONY_API_URL: setting(
      (name) =>
        v.pipe(
          v.string(),
          v.check((text) => /^https?:$/.test(urlOf(text)?.protocol ?? ''), `${name} must be an http or https URL`),
          v.check((text) => !urlOf(text)?.username && !urlOf(text)?.password, `${name} must not hold credentials; the key goes in TELEPHONY_API_KEY`),
          v.check((text) => !urlOf(text)?.search && !urlOf(text)?.hash, `${name} must be a base URL, without a query or fragment`),
          v.transform((text) => text.replace(/\/+$/, '')),
        ),
      'the base URL of the telephony platform (http provider), e.g. https://pbx.example.com/api/v1',
    ),
    TELEPHONY_API_KEY: setting(
      // Sent as a header: a line break in it would start another header.
      (name) => v.pipe(v.string(), v.regex(/^[\x21-\x7e]{1,4096}$/, `${name} must be printable ASCII without spaces, at most 4096 characters`)),
      "the telephony platform's credential (http provider), sent as a bearer token; never logged",
    ),
    TELEPHONY_TIMEOUT_MS: setting(env.integer(100, 120_000), 'a request to the telephony platform not answered within this fails (UPSTREAM_ERROR)', '10000'),
  }),
  v.rawTransform(({ dataset, addIssue, NEVER }): TelephonyConfig => {
    const e = dataset.value;
    const provider = e.TELEPHONY_PROVIDER ?? null;
    const misplaced = Object.entries(SETTINGS_OF)
      .filter(([owner]) => owner !== provider)
      .flatMap(([owner, names]) => names.filter((name) => e[name] !== undefined).map((name) => ({ owner, name })));
    for (const { owner, name } of misplaced) {
      addIssue({
        message: `${name} is a setting of the ${owner} provider, but TELEPHONY_PROVIDER is ${provider ?? 'unset'}: set TELEPHONY_PROVIDER=${owner} or remove ${name}`,
      });
    }
    if (misplaced.length > 0) return NEVER;
    if (provider === 'local') {
      if (e.TELEPHONY_EXTENSIONS === undefined) {
        addIssue({ message: 'TELEPHONY_PROVIDER=local needs TELEPHONY_EXTENSIONS, the extension pool (e.g. 100-199,300)' });
        return NEVER;
      }
      const pool = parsePool(e.TELEPHONY_EXTENSIONS);
      if ('problem' in pool) {
        addIssue({ message: pool.problem });
        return NEVER;
      }
      return { provider, extensions: pool.extensions };
    }
    if (provider === 'http') {
      const missing = SETTINGS_OF.http.filter((name) => e[name] === undefined);
      if (missing.length > 0) {
        addIssue({ message: `TELEPHONY_PROVIDER=http needs ${missing.join(' and ')}` });
        return NEVER;
      }
      return { provider, apiUrl: e.TELEPHONY_API_URL!, apiKey: e.TELEPHONY_API_KEY!, timeoutMs: e.TELEPHONY_TIMEOUT_MS };
    }
    return { provider: null };
  }),
);
