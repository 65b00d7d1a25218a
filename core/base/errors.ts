/** The core's error codes and their HTTP status; plugins declare their own (`errors` in definePlugin). */
export const CORE_ERROR_STATUS = {
  VALIDATION_ERROR: 400,
  BAD_REQUEST: 400,
  UNAUTHENTICATED: 401,
  /** The operation needs the person to have proved who they are recently (core/rpc/pipeline.ts, requireRecentSignIn). */
  STEP_UP_REQUIRED: 401,
  FORBIDDEN: 403,
  METHOD_NOT_FOUND: 404,
  NOT_FOUND: 404,
  CONFLICT: 409,
  PAYLOAD_TOO_LARGE: 413,
  RATE_LIMITED: 429,
  INTERNAL: 500,
  UPSTREAM_ERROR: 502,
  FEATURE_UNAVAILABLE: 503,
} as const;

/**
 * The error codes plugins declare, each with its HTTP status. A plugin adds
 * its own by declaration merging, so RpcError takes them, beside `errors` in
 * its definition, which the loader registers:
 *
 *   declare module 'rpc-service/plugin' {
 *     interface PluginErrorCodes { WORKFLOW_FAILED: 422 }
 *   }
 */
// eslint-disable-next-line @typescript-eslint/no-empty-object-type -- empty here, filled by declaration merging
export interface PluginErrorCodes {}

export type ErrorCode = keyof typeof CORE_ERROR_STATUS | keyof PluginErrorCodes;

/** The plugins' codes the loader accepted: one status per code in the process, as RpcError reads it without knowing its app. */
const pluginErrorStatus = new Map<string, number>();

/** The HTTP status of a core code or of a registered plugin code; undefined for any other. */
export const errorStatus = (code: string): number | undefined =>
  Object.hasOwn(CORE_ERROR_STATUS, code) ? CORE_ERROR_STATUS[code as keyof typeof CORE_ERROR_STATUS] : pluginErrorStatus.get(code);

/** Called by the loader once it has checked a plugin's codes against the core's and the other plugins'. */
export function registerErrorCodes(codes: Readonly<Record<string, number>>): void {
  for (const [code, status] of Object.entries(codes)) pluginErrorStatus.set(code, status);
}

export interface ValidationIssue {
  path: string;
  message: string;
}

export interface RpcErrorOptions {
  issues?: ValidationIssue[];
  /** Seconds after which a rate-limited caller may try again (sent as Retry-After). */
  retryAfter?: number;
  /** What the caller needs to go on (a sign-in's ticket, say): sent beside the message as `details`. */
  details?: Record<string, unknown>;
  cause?: unknown;
}

/**
 * An error whose message is meant for the caller. Anything thrown that is not
 * an RpcError is answered as INTERNAL with a generic message and an error id.
 */
export class RpcError extends Error {
  readonly code: ErrorCode;
  readonly status: number;
  readonly issues?: ValidationIssue[];
  readonly retryAfter?: number;
  readonly details?: Record<string, unknown>;

  constructor(code: ErrorCode, message: string, options: RpcErrorOptions = {}) {
    super(message, options.cause === undefined ? undefined : { cause: options.cause });
    this.name = 'RpcError';
    this.code = code;
    // A code no loaded plugin declared is a fault of the code that threw it: a server error.
    this.status = errorStatus(code) ?? CORE_ERROR_STATUS.INTERNAL;
    this.issues = options.issues;
    this.retryAfter = options.retryAfter;
    this.details = options.details;
  }
}

/** `1 file`, `3 files`: a count for a message (nouns with a plain plural). */
export const counted = (n: number, noun: string): string => `${n} ${noun}${n === 1 ? '' : 's'}`;

export const notFound = (message = 'Not found'): RpcError => new RpcError('NOT_FOUND', message);
export const conflict = (message: string): RpcError => new RpcError('CONFLICT', message);
export const forbidden = (message = 'Forbidden'): RpcError => new RpcError('FORBIDDEN', message);
export const badRequest = (message: string): RpcError => new RpcError('BAD_REQUEST', message);
export const unauthenticated = (message = 'Authentication required'): RpcError => new RpcError('UNAUTHENTICATED', message);

export function validationError(issues: ValidationIssue[]): RpcError {
  const summary = issues.map((issue) => (issue.path ? `${issue.path}: ${issue.message}` : issue.message)).join('; ');
  return new RpcError('VALIDATION_ERROR', `Invalid params: ${summary}`, { issues });
}

export interface ErrorBody {
  error: string;
  code: ErrorCode;
  issues?: ValidationIssue[];
  details?: Record<string, unknown>;
  errorId?: string;
}
