import { asClass } from 'awilix';
import { definePlugin } from 'rpc-service/plugin';
import { DEPS, type TelemetryDeps } from './deps.ts';
import { getStats, getThread, getTrace, listThreads } from './operations.ts';
import { TelemetryService } from './telemetry.service.ts';

/** AITelemetryRpc: read-only views of the traces of every AI call the service makes. */
export const aiTelemetryPlugin = definePlugin<TelemetryDeps>({
  id: 'ai-telemetry',
  group: 'AITelemetryRpc',
  coreVersion: '^2.0.0',
  deps: DEPS,
  services: { telemetryService: asClass(TelemetryService).singleton() },
  operations: { listThreads, getThread, getTrace, getStats },
});
