import { operationBuilder, type Deps } from 'rpc-service/plugin';
import type { TelemetryService } from './telemetry.service.ts';

/** What AITelemetryRpc uses: no service; it reads the core AI client's traces (core_ai_trace) through the request's own `ctx.em`. */
export const DEPS = [] as const;

export type TelemetryDeps = Deps<typeof DEPS, { telemetryService: TelemetryService }>;

export const defineOperation = operationBuilder<TelemetryDeps>();
