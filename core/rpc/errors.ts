/** Every error code the RPC endpoint can answer with, and its HTTP status. */
export const ERROR_STATUS = {
  VALIDATION_ERROR: 400,
  BAD_REQUEST: 400,
  UNAUTHENTICATED: 401,
  FORBIDDEN: 403,
  METHOD_NOT_FOUND: 404,
  NOT_FOUND: 404,
  CONFLICT: 409,
  PAYLOAD_TOO_LARGE: 413,
  QUOTA_EXCEEDED: 403,
  WORKFLOW_FAILED: 422,
  RATE_LIMITED: 429,
  INTERNAL: 500,
  UPSTREAM_ERROR: 502,
  FEATURE_UNAVAILABLE: 503,
} as const;

export type ErrorCode = keyof typeof ERROR_STATUS;

export interface ValidationIssue {
  path: string;
  message: string;
}

export interface RpcErrorOptions {
  issues?: ValidationIssue[];
  /** Seconds after which a rate-limited caller may try again (sent as Retry-After). */
  retryAfter?: number;
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

  constructor(code: ErrorCode, message: string, options: RpcErrorOptions = {}) {
    super(message, options.cause === undefined ? undefined : { cause: options.cause });
    this.name = 'RpcError';
    this.code = code;
    this.status = ERROR_STATUS[code];
    this.issues = options.issues;
    this.retryAfter = options.retryAfter;
  }
}

/** `1 file`, `3 files`: a count for a message (nouns with a plain plural). */
export const counted = (n: number, noun: string): string => `${n} ${noun}${n === 1 ? '' : 's'}`;

export const notFound = (message = 'Not found'): RpcError => new RpcError('NOT_FOUND', message);
export const conflict = (message: string): RpcError => new RpcError('CONFLICT', message);
export const forbidden = (message = 'Forbidden'): RpcError => new RpcError('FORBIDDEN', message);
export const badRequest = (message: string): RpcError => new RpcError('BAD_REQUEST', message);
export const unauthenticated = (message = 'Authentication required'): RpcError =>
  new RpcError('UNAUTHENTICATED', message);

export function validationError(issues: ValidationIssue[]): RpcError {
  const summary = issues.map((issue) => (issue.path ? `${issue.path}: ${issue.message}` : issue.message)).join('; ');
  return new RpcError('VALIDATION_ERROR', `Invalid params: ${summary}`, { issues });
}

export interface ErrorBody {
  error: string;
  code: ErrorCode;
  issues?: ValidationIssue[];
  errorId?: string;
}
