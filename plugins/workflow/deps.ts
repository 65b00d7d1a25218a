import { operationBuilder, type Deps } from 'rpc-service/plugin';
import type { WorkflowService } from './workflow.service.ts';

/** What WorkflowRpc uses: the tool catalogue (tool nodes, getAvailableTools), the AI catalogue (ai nodes) and the collections forms pick values from. */
export const DEPS = ['tools', 'aiCatalogue', 'collections'] as const;

export type WorkflowDeps = Deps<typeof DEPS, { workflowService: WorkflowService }>;

export const defineOperation = operationBuilder<WorkflowDeps>();
