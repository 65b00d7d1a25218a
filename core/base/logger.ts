import { pino, type DestinationStream, type Logger } from 'pino';
import { databaseErrorRecord, isDatabaseError } from './database-errors.ts';
import { traceFields } from './tracing.ts';

export type { Logger };

/**
 * Paths whose values never reach a log line. Request params are not logged at
 * all; this list guards objects that end up in a log by accident.
 */
const REDACT_PATHS = [
  'password',
  'newPassword',
  'currentPassword',
  'token',
  'fullKey',
  'apiKey',
  'secret',
  'masterKey',
  'webhookSecret',
  'headers.authorization',
  'headers.cookie',
  'headers["x-api-key"]',
  'headers["set-cookie"]',
  '*.password',
  '*.newPassword',
  '*.currentPassword',
  '*.token',
  '*.fullKey',
  '*.apiKey',
  '*.secret',
  '*.masterKey',
  '*.webhookSecret',
  '*.headers.authorization',
  '*.headers.cookie',
  '*.headers["x-api-key"]',
];

/**
 * pino's error serializer, except that a database error, wherever it sits
 * (the error itself, a cause, a property, one of an AggregateError's), is
 * logged without the values of its statement or the entity it holds, and
 * that of an error's own properties only its plain values (a code, a status)
 * and errors are logged: an object it carries (an entity, a statement's
 * parameters, a request with its headers) is named by its class alone.
 */
export function serializeError(err: unknown, seen = new WeakSet<Error>()): unknown {
  if (!(err instanceof Error)) return err;
  if (seen.has(err)) return '[Circular]';
  seen.add(err);
  if (isDatabaseError(err)) return databaseErrorRecord(err);
  const record: Record<string, unknown> = { type: err.constructor.name, message: err.message, stack: err.stack };
  for (const [key, value] of Object.entries(err)) record[key] = propertyOf(value, seen);
  if (err.cause !== undefined) record.cause = serializeError(err.cause, seen);
  if (err instanceof AggregateError) record.aggregateErrors = err.errors.map((inner) => serializeError(inner, seen));
  return record;
}

function propertyOf(value: unknown, seen: WeakSet<Error>): unknown {
  if (value instanceof Error) return serializeError(value, seen);
  if (value === null || typeof value !== 'object') return typeof value === 'function' || typeof value === 'symbol' ? undefined : value;
  return `[${Array.isArray(value) ? 'Array' : (value.constructor?.name ?? 'Object')}]`;
}

/** With `traced`, a line written inside a span carries its trace_id and span_id; without, pino calls nothing per line for it. */
export function createLogger(level: string, destination?: DestinationStream, traced = false): Logger {
  return pino(
    {
      level,
      ...(traced ? { mixin: traceFields } : {}),
      base: { service: 'rpc-service' },
      redact: { paths: REDACT_PATHS, censor: '[redacted]' },
      serializers: { err: (err: unknown) => serializeError(err) },
      hooks: {
        // Without a message pino logs the error's own, which for a database error holds the statement's values.
        logMethod(args, method) {
          const [first] = args as unknown[];
          const err = first instanceof Error ? first : (first as { err?: unknown } | null)?.err;
          if (args.length === 1 && isDatabaseError(err)) return method.apply(this, [first as object, databaseErrorRecord(err as Error).message as string]);
          return method.apply(this, args);
        },
      },
    },
    destination,
  );
}
