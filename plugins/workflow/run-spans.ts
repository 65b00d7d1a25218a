import { context, SpanStatusCode, trace, type Attributes, type Span } from '@opentelemetry/api';
import type { Step } from './instance.entity.ts';

/**
 * Spans of runs and their nodes, in the trace of the call or job that runs
 * them. Without a tracer provider (the service's tracing is off) they are
 * @opentelemetry/api's no-op spans.
 */
export const tracer = trace.getTracer('rpc-service.workflow');
export const failed = (span: Span) => span.setStatus({ code: SpanStatusCode.ERROR });

export const nodeAttributes = (node: string, type: string) => ({ 'workflow.node.id': node, 'workflow.node.type': type });

/**
 * Runs `run` in an active span of that name, which ends with it; failed when
 * it throws or answers `{ok: false}` (a node's reply).
 */
export function inSpan<T>(name: string, attributes: Attributes, run: () => Promise<T>): Promise<T> {
  return tracer.startActiveSpan(name, { attributes }, async (span) => {
    try {
      const outcome = await run();
      if ((outcome as { ok?: unknown }).ok === false) failed(span);
      return outcome;
    } catch (error) {
      failed(span);
      throw error;
    } finally {
      span.end();
    }
  });
}

/** Spans of the part's nodes that ran on its thread alone, each from the step before it (or the part's start) to its own. */
export function recordSteps(part: Span, steps: readonly Step[], began: Date, hostNodes: ReadonlySet<string>): void {
  const parent = trace.setSpan(context.active(), part);
  let from = began;
  for (const step of steps) {
    const at = new Date(step.at);
    if (!hostNodes.has(step.node)) {
      const span = tracer.startSpan(`workflow node ${step.type}`, { attributes: nodeAttributes(step.node, step.type), startTime: from }, parent);
      if (step.status === 'failed') failed(span);
      span.end(at);
    }
    from = at;
  }
}
