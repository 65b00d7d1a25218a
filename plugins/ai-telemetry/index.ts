import { asClass } from 'awilix';
import { definePlugin } from 'rpc-service/plugin';
import { DEPS, type TelemetryDeps } from './deps.ts';
import { migrations } from './migrations/index.ts';
import { getStats, getThread, getTrace, getUsage, listThreads } from './operations.ts';
import { TelemetryService } from './telemetry.service.ts';
import { AiTrace } from './trace.entity.ts';

/** AITelemetryRpc: records every AI call the service makes as a trace, and read-only views of them. */
export const aiTelemetryPlugin = definePlugin<TelemetryDeps>({
  id: 'ai-telemetry',
  group: 'AITelemetryRpc',
  coreVersion: '^2.0.0',
  deps: DEPS,
  entities: [AiTrace],
  migrations,
  services: { telemetryService: asClass(TelemetryService).singleton() },
  extends: {
    'core.aiCalls': (deps) => [{ record: (call) => deps.telemetryService.record(call) }],
  },
  operations: { listThreads, getThread, getTrace, getStats, getUsage },
});
