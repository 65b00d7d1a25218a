import { operationBuilder, type Deps } from 'rpc-service/plugin';
import type { AiConfigService } from './ai-config.service.ts';

/** What AIConfigRpc uses: the core's AI catalogue, read-only, and its AI client (which providers have their key). */
export const DEPS = ['aiCatalogue', 'ai'] as const;

export type AiConfigDeps = Deps<typeof DEPS, { aiConfigService: AiConfigService }>;

export const defineOperation = operationBuilder<AiConfigDeps>();
