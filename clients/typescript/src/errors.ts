import type { ErrorCode } from './operations.ts';

/** One problem with the params: where (`title`, `items.0.name`) and what. */
export interface Issue {
  path: string;
  message: string;
}

/**
 * The client's own codes, for failures with no answer from the service:
 * the request never reached it (`NETWORK_ERROR`) or what came back is not
 * the service's answer (`INVALID_RESPONSE`, say a proxy's error page).
 */
export type ClientErrorCode = 'NETWORK_ERROR' | 'INVALID_RESPONSE';

export interface RpcErrorFields {
  code: ErrorCode | ClientErrorCode;
  message: string;
  issues?: Issue[];
  requestId?: string;
  errorId?: string;
  retryAfter?: number;
  details?: Record<string, unknown>;
  status?: number;
  cause?: unknown;
}

/** A call the service refused or could not answer: `code` is the service's (the table of codes in the service's docs/endpoint.md). */
export class RpcError extends Error {
  override readonly name = 'RpcError';
  /** The service's code (`VALIDATION_ERROR`, `NOT_FOUND`, a plugin's own) or the client's (`NETWORK_ERROR`, `INVALID_RESPONSE`). */
  readonly code: ErrorCode | ClientErrorCode;
  /** With VALIDATION_ERROR: each problem with the params. */
  readonly issues: Issue[] | undefined;
  /** The service's id of the request, as its logs carry it: give it when reporting a problem. */
  readonly requestId: string | undefined;
  /** With INTERNAL: the id of the logged fault. */
  readonly errorId: string | undefined;
  /** Seconds the service asked to wait before trying again (RATE_LIMITED). */
  readonly retryAfter: number | undefined;
  /** What the caller needs to go on, where the service gives it (SECOND_FACTOR_REQUIRED's ticket, say). */
  readonly details: Record<string, unknown> | undefined;
  /** The HTTP status the code stands for. */
  readonly status: number | undefined;

  constructor({ code, message, issues, requestId, errorId, retryAfter, details, status, cause }: RpcErrorFields) {
    super(message, cause === undefined ? undefined : { cause });
    this.code = code;
    this.issues = issues;
    this.requestId = requestId;
    this.errorId = errorId;
    this.retryAfter = retryAfter;
    this.details = details;
    this.status = status;
  }
}
