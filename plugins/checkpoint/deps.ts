import { operationBuilder, type Deps } from 'rpc-service/plugin';
import type { CheckpointConfig } from './config.ts';
import type { CheckpointService } from './checkpoint.service.ts';

/**
 * What CheckpointRpc uses: the database (the repositories, one writer per
 * scope across nodes), the request pipeline (the export's routes), the bus (dataScopeRefreshed), the scopes of records,
 * its data folder (repositories of earlier releases) and the users
 * (checkpoints' authors).
 */
export const DEPS = ['db', 'http', 'bus', 'dataScopes', 'dataFolders', 'userService'] as const;

export type CheckpointDeps = Deps<typeof DEPS, { checkpointService: CheckpointService }, CheckpointConfig>;

export const defineOperation = operationBuilder<CheckpointDeps>();
