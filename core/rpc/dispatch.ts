import type { Context } from '@opentelemetry/api';
import * as v from 'valibot';
import type { PresentedCredentials } from '../credentials/authenticator.ts';
import { activeContext, failedWith, inSpan, remoteParent, SpanKind, tracingOn, type Span } from '../base/tracing.ts';
import type { Principal } from '../base/context.ts';
import { RpcError, validationError, type ErrorBody, type ValidationIssue } from '../base/errors.ts';
import { unsafeInputIssues } from '../base/input-guard.ts';
import { answerData, type Transport } from './operation.ts';
import type { RequestPipeline } from './pipeline.ts';
import type { OperationListing, RegisteredOperation, Registry } from './registry.ts';

const REPORT_ALL_ISSUES = { abortEarly: false } as const;

export interface DispatchRequest {
  method: string;
  params: unknown;
  requestId: string;
  /** What the caller presented; ignored when `principal` is given. */
  credentials?: PresentedCredentials;
  /** An already known caller (the in-process caller); null calls anonymously. */
  principal?: Principal | null;
  transport: Transport;
  /** Headers that may carry the caller's W3C trace context (`traceparent`), read only when tracing is on. */
  traceHeaders?: Readonly<Record<string, unknown>>;
}

interface Outcome {
  method: string;
  userId: string | null;
  subscriptionId?: string | null;
  /** With tracing on, the call's span: its log line (recordCall) is written inside it. */
  trace?: Context;
}

export type DispatchResult = ({ ok: true; result: unknown } | { ok: false; error: RpcError; errorId?: string }) & Outcome;

export function issuesOf(issues: readonly v.BaseIssue<unknown>[]): ValidationIssue[] {
  return issues.map((issue) => ({
    path: issue.path?.map((item) => String(item.key)).join('.') ?? '',
    message: issue.message,
  }));
}

export function errorBody(error: RpcError, errorId?: string): ErrorBody {
  return {
    error: error.message,
    code: error.code,
    ...(error.issues ? { issues: error.issues } : {}),
    ...(error.details ? { details: error.details } : {}),
    ...(errorId ? { errorId } : {}),
  };
}

/** Throws when an answer is outside the operation's declared result (an envelope's fields are its answer). */
function checkResult(operation: RegisteredOperation, value: unknown): void {
  if (!operation.result) return;
  const answer = answerData(value);
  const checked = v.safeParse(operation.result, answer, REPORT_ALL_ISSUES);
  if (checked.success) return;
  const problems = issuesOf(checked.issues).map((issue) => `${issue.path || '(result)'}: ${issue.message}`);
  throw new Error(`${operation.method} answered outside its declared result: ${problems.slice(0, 10).join('; ')}`);
}

/**
 * The path every operation call takes, whatever carried it: look the method
 * up in the frozen registry, then the request pipeline's steps (the caller,
 * their access) around validating params (first what no operation accepts,
 * then the operation's schema) and running the handler.
 */
export class Dispatcher {
  readonly #registry: Registry;
  readonly #pipeline: RequestPipeline;
  readonly #checkResults: boolean;

  /** With checkResults, an answer outside the operation's declared result is a fault of the operation: INTERNAL, logged with the issues. */
  constructor(registry: Registry, pipeline: RequestPipeline, { checkResults = false }: { checkResults?: boolean } = {}) {
    this.#registry = registry;
    this.#pipeline = pipeline;
    this.#checkResults = checkResults;
  }

  /** Every operation as `GET /api/rpc` lists it: what a plugin offers people to choose from (an OAuth consent's scopes). */
  listing(): readonly OperationListing[] {
    return this.#registry.listing();
  }

  /**
   * Answers synchronously when nothing needs waiting for (a cached credential
   * and a synchronous handler): the hot path then creates no promise at all.
   */
  dispatch(request: DispatchRequest): DispatchResult | Promise<DispatchResult> {
    return tracingOn() ? this.#traced(request) : this.#dispatch(request);
  }

  /**
   * The call inside a span named for its method, continuing the caller's
   * trace when its headers carry one. It records who called and how it ended,
   * never params or results.
   */
  #traced(request: DispatchRequest): DispatchResult | Promise<DispatchResult> {
    return inSpan(
      {
        name: request.method,
        kind: SpanKind.SERVER,
        attributes: { 'rpc.system.name': 'jsonrpc', 'rpc.method': request.method },
        parent: request.traceHeaders ? remoteParent(request.traceHeaders) : undefined,
        outcome: describeCall,
      },
      () => this.#dispatch(request),
    );
  }

  #dispatch(request: DispatchRequest): DispatchResult | Promise<DispatchResult> {
    const operation = this.#registry.get(request.method);
    if (!operation) {
      return { ok: false, error: new RpcError('METHOD_NOT_FOUND', `Unknown method ${request.method}`), method: 'unknown', userId: null };
    }
    if (request.principal !== undefined) return this.#run(operation, request, request.principal);
    let found: Principal | null | Promise<Principal | null>;
    try {
      found = this.#pipeline.principalFor(request.credentials ?? {}, operation.access);
    } catch (thrown) {
      return this.#failure(thrown, operation, request, null);
    }
    return found instanceof Promise
      ? found.then(
          (principal) => this.#run(operation, request, principal),
          (thrown) => this.#failure(thrown, operation, request, null),
        )
      : this.#run(operation, request, found);
  }

  #run(operation: RegisteredOperation, request: DispatchRequest, principal: Principal | null): DispatchResult | Promise<DispatchResult> {
    let metered: Promise<void> | undefined;
    try {
      this.#pipeline.admitOperation(operation, principal);
      metered = this.#pipeline.meter(principal);
    } catch (thrown) {
      return this.#failure(thrown, operation, request, principal);
    }
    // A rate-limited credential waits for its count; every other call goes on synchronously.
    return metered
      ? metered.then(
          () => this.#call(operation, request, principal),
          (thrown) => this.#failure(thrown, operation, request, principal),
        )
      : this.#call(operation, request, principal);
  }

  #call(operation: RegisteredOperation, request: DispatchRequest, principal: Principal | null): DispatchResult | Promise<DispatchResult> {
    try {
      const unsafe = unsafeInputIssues(request.params);
      if (unsafe.length > 0) throw validationError(unsafe);
      const parsed = v.safeParse(operation.params, request.params ?? {}, REPORT_ALL_ISSUES);
      if (!parsed.success) throw validationError(issuesOf(parsed.issues));
      const { stepUp } = operation;
      if (stepUp && (stepUp === true || stepUp(parsed.output))) this.#pipeline.requireRecentSignIn(principal, operation.method);
      const ctx = this.#pipeline.context(request.requestId, principal);
      const result = operation.handler({ params: parsed.output, ctx, deps: operation.deps, transport: request.transport });
      return result instanceof Promise
        ? result.then(
            (value) => this.#success(value, operation, request, principal),
            (thrown) => this.#failure(thrown, operation, request, principal),
          )
        : this.#success(result, operation, request, principal);
    } catch (thrown) {
      return this.#failure(thrown, operation, request, principal);
    }
  }

  #success(result: unknown, operation: RegisteredOperation, request: DispatchRequest, principal: Principal | null): DispatchResult {
    if (this.#checkResults) {
      try {
        checkResult(operation, result);
      } catch (thrown) {
        return this.#failure(thrown, operation, request, principal);
      }
    }
    return traced({ ok: true, result, method: operation.method, userId: principal?.userId ?? null }, principal);
  }

  #failure(thrown: unknown, operation: RegisteredOperation, request: DispatchRequest, principal: Principal | null): DispatchResult {
    const { error, errorId } = this.#pipeline.failure(thrown, { requestId: request.requestId, method: operation.method });
    return traced({ ok: false, error, errorId, method: operation.method, userId: principal?.userId ?? null }, principal);
  }
}

/** With tracing on, the result also names the caller's subscription and the span the call ran in; off, it is left as it is. */
function traced(result: DispatchResult, principal: Principal | null): DispatchResult {
  if (!tracingOn()) return result;
  result.subscriptionId = principal?.subscriptionId ?? null;
  result.trace = activeContext();
  return result;
}

function describeCall(span: Span, outcome: DispatchResult): void {
  if (outcome.subscriptionId) span.setAttribute('subscription.id', outcome.subscriptionId);
  if (outcome.userId) span.setAttribute('user.id', outcome.userId);
  // 'OK' is the conventions' example of a success, in the same form as our failure codes (NOT_FOUND, ...).
  span.setAttribute('rpc.status_code', outcome.ok ? 'OK' : outcome.error.code);
  if (!outcome.ok) failedWith(span, outcome.error.code);
}
