import { operationBuilder, type Deps } from 'rpc-service/plugin';
import type { MemoryConfig } from './config.ts';
import type { MemoryService } from './memory.service.ts';

/** What MemoryRpc uses: the database, the AI client and catalogue for embeddings, jobs (a change of model), and the auth plugin's users (for targetUserId). */
export const DEPS = ['db', 'ai', 'aiCatalogue', 'jobs', 'userService'] as const;

export type MemoryDeps = Deps<typeof DEPS, { memoryService: MemoryService }, MemoryConfig>;

export const defineOperation = operationBuilder<MemoryDeps>();
