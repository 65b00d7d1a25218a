import { context, propagation, ROOT_CONTEXT, SpanKind, SpanStatusCode, trace, type Attributes, type Context, type Span } from '@opentelemetry/api';

export { SpanKind, type Span };

/**
 * Spans of the service, over @opentelemetry/api alone: the SDK and the
 * exporter are loaded only when an OTLP endpoint is set (core/base/telemetry.ts).
 * Until then `tracingOn()` is false, and the hot paths (dispatch, statements)
 * check it before building anything, so tracing that is off costs one
 * boolean read.
 */
let on = false;

export const tracingOn = (): boolean => on;

/** Called by core/base/telemetry.ts once its provider is registered, and again when it is shut down. */
export function setTracingOn(value: boolean): void {
  on = value;
}

const tracer = () => trace.getTracer('rpc-service');

export interface SpanSpec<T> {
  name: string;
  kind?: SpanKind;
  attributes?: Attributes;
  /** The parent; the active span when absent. */
  parent?: Context;
  /** Attributes of the outcome, once `run` has returned or its promise has settled. */
  outcome?: (span: Span, value: T) => void;
}

/**
 * Runs `run` inside a new span, which ends when `run` returns or its promise
 * settles: a synchronous `run` stays synchronous. A throw marks the span
 * failed with the error's class only, since a message may quote values (a
 * database error's holds its statement's).
 */
export function inSpan<T>(spec: SpanSpec<Awaited<T>>, run: () => T): T {
  if (!on) return run();
  const parent = spec.parent ?? context.active();
  const span = tracer().startSpan(spec.name, { kind: spec.kind, attributes: spec.attributes }, parent);
  const settle = (value: Awaited<T>): Awaited<T> => {
    spec.outcome?.(span, value);
    span.end();
    return value;
  };
  const fail = (error: unknown): never => {
    failedWith(span, errorType(error));
    span.end();
    throw error;
  };
  let result: T;
  try {
    result = context.with(trace.setSpan(parent, span), run);
  } catch (error) {
    return fail(error);
  }
  return (result instanceof Promise ? result.then(settle, fail) : settle(result as Awaited<T>)) as T;
}

/** Marks a span failed with a code of ours (an RpcError's, an HTTP status) or an error's class. */
export function failedWith(span: Span, code: string): void {
  span.setStatus({ code: SpanStatusCode.ERROR });
  span.setAttribute('error.type', code);
}

const errorType = (error: unknown): string => (error instanceof Error ? error.constructor.name : typeof error);

/** Marks the active span failed, for an error handled where it happened (a job attempt's). */
export function failActiveSpan(error: unknown): void {
  const span = on ? trace.getSpan(context.active()) : undefined;
  if (span) failedWith(span, errorType(error));
}

/** Whether a span is active: statements are traced only inside one, so the job queue's polling makes no traces of its own. */
export const inTrace = (): boolean => trace.getSpan(context.active()) !== undefined;

/** The active span's W3C `traceparent`, to carry the trace to a job or another service. */
export function currentTraceparent(): string | undefined {
  const carrier: Record<string, string> = {};
  propagation.inject(context.active(), carrier);
  return carrier.traceparent;
}

/** The caller's trace, from a W3C `traceparent` (and `tracestate`) in headers or a job; none: a new trace. */
export const remoteParent = (carrier: Readonly<Record<string, unknown>>): Context => propagation.extract(ROOT_CONTEXT, carrier);

/** Runs `run` with a context captured elsewhere active, so what it logs and starts belongs to that trace. */
export const withContext = <T>(captured: Context | undefined, run: () => T): T => (captured ? context.with(captured, run) : run());

export const activeContext = (): Context => context.active();

/** The trace and span ids of the active span, for a log line (core/base/logger.ts). */
export function traceFields(): { trace_id?: string; span_id?: string } {
  const span = trace.getSpan(context.active());
  if (!span) return {};
  const { traceId, spanId } = span.spanContext();
  return { trace_id: traceId, span_id: spanId };
}

/**
 * An agent's call of a tool as OpenTelemetry's GenAI conventions name it
 * (`execute_tool`), so LLM observability tools show it as one: a workflow's
 * tool node, or an MCP client's `tools/call`. `callId` is the call's own id.
 */
export const executeToolAttributes = (tool: string, callId: string): Record<string, string> => ({
  'gen_ai.operation.name': 'execute_tool',
  'gen_ai.tool.name': tool,
  'gen_ai.tool.type': 'function',
  'gen_ai.tool.call.id': callId,
});
