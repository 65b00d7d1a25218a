import { pino, type DestinationStream, type Logger } from 'pino';

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
  '*.headers.authorization',
  '*.headers.cookie',
  '*.headers["x-api-key"]',
];

export function createLogger(level: string, destination?: DestinationStream): Logger {
  return pino(
    {
      level,
      base: { service: 'rpc-service' },
      redact: { paths: REDACT_PATHS, censor: '[redacted]' },
      serializers: { err: pino.stdSerializers.err },
    },
    destination,
  );
}
