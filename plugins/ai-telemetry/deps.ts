import { operationBuilder, type Deps } from 'rpc-service/plugin';
import type { TelemetryService } from './telemetry.service.ts';

/** What AITelemetryRpc uses: the database, where the core's AI client records its traces (core_ai_trace). */
export const DEPS = ['db'] as const;

export type TelemetryDeps = Deps<typeof DEPS, { telemetryService: TelemetryService }>;

export const defineOperation = operationBuilder<TelemetryDeps>();
