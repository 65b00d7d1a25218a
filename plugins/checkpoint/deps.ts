import { operationBuilder, type Deps } from 'rpc-service/plugin';
import type { CheckpointConfig } from './config.ts';
import type { CheckpointService } from './checkpoint.service.ts';

/**
 * What CheckpointRpc uses: the worker pool (git), the database (one writer per
 * scope across nodes, restores of records in one transaction), the bus
 * (dataScopeRefreshed), the scopes of records, its data folder and the users
 * (checkpoints' authors).
 */
export const DEPS = ['db', 'pool', 'bus', 'dataScopes', 'dataFolders', 'userService'] as const;

export type CheckpointDeps = Deps<typeof DEPS, { checkpointService: CheckpointService }, CheckpointConfig>;

export const defineOperation = operationBuilder<CheckpointDeps>();
