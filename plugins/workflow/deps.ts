import { jobBuilder, operationBuilder, type Deps } from 'rpc-service/plugin';
import type { WorkflowConfig } from './config.ts';
import type { NodeEffects } from './effects.ts';
import type { WorkflowRunner } from './runner.ts';
import type { WorkflowService } from './workflow.service.ts';

/**
 * What WorkflowRpc uses: the database, the worker pool (the interpreter), jobs (timers, recovery), the in-process
 * operation caller (rpc and tool nodes), the outbound guard (http nodes), the AI client and catalogue (ai nodes),
 * the tool catalogue, the collections forms pick values from, the bus (run events) and the auth plugin's users.
 */
export const DEPS = ['db', 'pool', 'jobs', 'operations', 'outbound', 'ai', 'aiCatalogue', 'tools', 'collections', 'bus', 'userService'] as const;

export type WorkflowDeps = Deps<typeof DEPS, { workflowService: WorkflowService; workflowRunner: WorkflowRunner; nodeEffects: NodeEffects }, WorkflowConfig>;

export const defineOperation = operationBuilder<WorkflowDeps>();
export const defineJob = jobBuilder<WorkflowDeps>();
