import { context, propagation, trace } from '@opentelemetry/api';
import type { TracingConfig } from './config.ts';
import { CORE_VERSION } from './version.ts';
import { setTracingOn } from './tracing.ts';

export interface Tracing {
  /** Sends the spans still waiting, then unregisters the provider. */
  stop(): Promise<void>;
}

/**
 * Registers OpenTelemetry's SDK: spans batched and posted as OTLP/HTTP JSON,
 * W3C trace context, the active span carried by AsyncLocalStorage. Imported
 * here only, and only when an endpoint is set (core/app/app.ts), so a service
 * without one never loads them.
 */
export async function startTracing(config: TracingConfig): Promise<Tracing> {
  const [{ AsyncLocalStorageContextManager }, { W3CTraceContextPropagator }, { resourceFromAttributes }, sdk, { OTLPTraceExporter }] = await Promise.all([
    import('@opentelemetry/context-async-hooks'),
    import('@opentelemetry/core'),
    import('@opentelemetry/resources'),
    import('@opentelemetry/sdk-trace'),
    import('@opentelemetry/exporter-trace-otlp-http'),
  ]);
  // parentbased_<x> follows the caller's sampling decision, and <x> decides for a new trace.
  const root = config.sampler.endsWith('always_on')
    ? new sdk.AlwaysOnSampler()
    : config.sampler.endsWith('always_off')
      ? new sdk.AlwaysOffSampler()
      : new sdk.TraceIdRatioBasedSampler(config.samplerRatio);
  const provider = new sdk.TracerProvider({
    resource: resourceFromAttributes({ 'service.name': config.serviceName, 'service.version': CORE_VERSION }),
    sampler: config.sampler.startsWith('parentbased_') ? new sdk.ParentBasedSampler({ root }) : root,
    spanProcessors: [new sdk.BatchSpanProcessor({ exporter: new OTLPTraceExporter({ url: config.url }), scheduledDelayMillis: config.scheduleDelayMs })],
  });
  const contextManager = new AsyncLocalStorageContextManager().enable();
  context.setGlobalContextManager(contextManager);
  propagation.setGlobalPropagator(new W3CTraceContextPropagator());
  trace.setGlobalTracerProvider(provider);
  setTracingOn(true);
  return {
    async stop() {
      setTracingOn(false);
      await provider.shutdown();
      trace.disable();
      propagation.disable();
      context.disable();
    },
  };
}
