import { operationBuilder, type Deps } from 'rpc-service/plugin';
import type { TelemetryService } from './telemetry.service.ts';

/** What AITelemetryRpc uses: the database, to record each AI call on a connection of its own (reads go through the request's `ctx.em`). */
export const DEPS = ['db'] as const;

export type TelemetryDeps = Deps<typeof DEPS, { telemetryService: TelemetryService }>;

export const defineOperation = operationBuilder<TelemetryDeps>();
