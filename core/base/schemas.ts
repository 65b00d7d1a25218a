import * as v from 'valibot';
import { unsafeInputIssues } from './input-guard.ts';

/** Shared params pieces, so every group spells the same rule the same way. */

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

/** For ids that arrive outside a params schema (URLs, filters): a non-UUID can only be "not found". */
export const isUuid = (value: unknown): value is string => typeof value === 'string' && UUID.test(value);

export const recordId = (label = 'id') => v.pipe(v.string(), v.uuid(`${label} must be a UUID`));

/** A string, trimmed, not empty and at most `max` characters, with messages naming the field. */
export const trimmedText = (label: string, max: number) =>
  v.pipe(
    v.string(`${label} must be a string`),
    v.trim(),
    v.minLength(1, `${label} must not be empty`),
    v.maxLength(max, `${label} must be at most ${max} characters`),
  );

/** `2026-11-24 18:00` as `2026-11-24T18:00Z`: a time without a zone is UTC, whatever the server's time zone. */
const inUtcUnlessZoned = (text: string) => {
  const normal = text.replace(' ', 'T');
  return /T[\d:.]+$/i.test(normal) ? `${normal}Z` : normal;
};

/** An ISO 8601 date or timestamp (`2026-11-24`, `2026-11-24T18:00:00Z`; UTC when no zone is given), as a Date. */
/** A date as answers carry it (docs/endpoint.md): ISO 8601 text in UTC, for declared results. */
export const wireTimestamp = v.pipe(v.string(), v.isoTimestamp());

export const isoTime = (label: string) =>
  v.pipe(
    v.string(`${label} must be an ISO 8601 date or timestamp`),
    v.regex(
      /^\d{4}-\d{2}-\d{2}(?:[T ]\d{2}:\d{2}(?::\d{2}(?:\.\d{1,9})?)?(?:Z|[+-]\d{2}:?\d{2})?)?$/i,
      `${label} must be an ISO 8601 date or timestamp, like 2026-11-24T18:00:00Z`,
    ),
    v.transform(inUtcUnlessZoned),
    v.check((text) => !Number.isNaN(Date.parse(text)) && Number(text.slice(0, 4)) >= 1, `${label} must be a real date`),
    v.transform((text) => new Date(text)),
  );

const CURRENCIES: ReadonlySet<string> = new Set(Intl.supportedValuesOf('currency'));

/** An ISO 4217 currency code, upper-cased: `usd` is `USD`. */
export const currencyCode = (label = 'currency') =>
  v.pipe(
    v.string(`${label} must be a string`),
    v.trim(),
    v.toUpperCase(),
    v.check((code) => CURRENCIES.has(code), `${label} must be an ISO 4217 currency code, like USD or EUR`),
  );

/** The largest amount of money a record holds, in minor units: ten billion in major units of a two-digit currency. */
export const MAX_MINOR_UNITS = 1_000_000_000_000;

/** An amount of money as a whole number of the currency's minor unit (cents for USD, yen for JPY), never negative. */
export const minorUnits = (label: string) =>
  v.pipe(
    v.number(`${label} must be a number`),
    v.integer(`${label} must be a whole number of the currency's minor unit (cents)`),
    v.minValue(0, `${label} must not be negative`),
    v.maxValue(MAX_MINOR_UNITS, `${label} must be at most ${MAX_MINOR_UNITS}`),
  );

/** A list of short strings (tags, channels, contact ids): each trimmed and not empty, at most `maxItems`, duplicates dropped. */
export const stringList = (label: string, { maxItems = 50, maxLength = 100 } = {}) =>
  v.pipe(
    v.array(trimmedText(`${label}[]`, maxLength), `${label} must be an array of strings`),
    v.maxLength(maxItems, `at most ${maxItems} ${label}`),
    v.transform((list) => [...new Set(list)]),
  );

export const email = v.pipe(v.string(), v.trim(), v.toLowerCase(), v.maxLength(254, 'E-mail address is too long'), v.email('Invalid e-mail address'));

/** Usernames: 3 to 32 letters, digits, dots, dashes or underscores. */
export const username = v.pipe(
  v.string(),
  v.trim(),
  v.regex(/^[A-Za-z0-9._-]{3,32}$/, 'Username must be 3 to 32 letters, digits, dots, dashes or underscores'),
);

export const password = v.pipe(
  v.string(),
  v.minLength(8, 'Password must be at least 8 characters'),
  v.maxLength(256, 'Password must be at most 256 characters'),
);

function isJsonObjectText(text: string): boolean {
  try {
    const value: unknown = JSON.parse(text);
    return typeof value === 'object' && value !== null && !Array.isArray(value);
  } catch {
    return false;
  }
}

/** The text of a JSON object, delivered to the handler parsed. */
export const jsonObjectText = (label: string) =>
  v.pipe(
    v.string(),
    v.check(isJsonObjectText, `${label} must be the text of a JSON object, e.g. {"projectId": "p1"}`),
    v.transform((text) => JSON.parse(text) as Record<string, unknown>),
    // The text passed the dispatcher's check; what it decodes to (an escaped \u0000, say) has not.
    v.check((object) => unsafeInputIssues(object).length === 0, `${label} must not contain a NUL character (\\u0000) or nest too deeply`),
  );

/** How many results a search answers: a whole number from 1 to `max`, `fallback` when omitted. */
export const topK = (max: number, fallback = 5) =>
  v.optional(
    v.pipe(
      v.number('topK must be a number'),
      v.integer('topK must be a whole number'),
      v.minValue(1, 'topK must be at least 1'),
      v.maxValue(max, `topK must be at most ${max}`),
    ),
    fallback,
  );
