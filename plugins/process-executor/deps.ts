import { jobBuilder, operationBuilder, type Deps } from 'rpc-service/plugin';
import type { ProcessConfig } from './config.ts';
import type { ProcessExecutor } from './process-executor.ts';

/** What ProcessExecutorRpc uses: the database (process records), the bus (the node's id) and jobs (recovery of records whose node stopped). */
export const DEPS = ['db', 'bus', 'jobs'] as const;

export type ProcessDeps = Deps<typeof DEPS, { processExecutor: ProcessExecutor }, ProcessConfig>;

export const defineOperation = operationBuilder<ProcessDeps>();
export const defineJob = jobBuilder<ProcessDeps>();
