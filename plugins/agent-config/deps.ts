import { operationBuilder, type Deps } from 'rpc-service/plugin';
import type { AgentService } from './agent.service.ts';

/** What AgentConfigRpc uses: the AI catalogue (models), the tool catalogue, and uploads for avatars. */
export const DEPS = ['aiCatalogue', 'tools', 'uploadService'] as const;

export type AgentConfigDeps = Deps<typeof DEPS, { agentService: AgentService }>;

export const defineOperation = operationBuilder<AgentConfigDeps>();
