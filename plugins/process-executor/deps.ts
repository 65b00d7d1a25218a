import { operationBuilder, type Deps } from 'rpc-service/plugin';
import type { ProcessConfig } from './config.ts';
import type { ProcessExecutor } from './process-executor.ts';

/** What ProcessExecutorRpc uses: the database (process records) and the bus (the node's id). */
export const DEPS = ['db', 'bus'] as const;

export type ProcessDeps = Deps<typeof DEPS, { processExecutor: ProcessExecutor }, ProcessConfig>;

export const defineOperation = operationBuilder<ProcessDeps>();
