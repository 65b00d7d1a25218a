import { asClass } from 'awilix';
import { definePlugin } from 'rpc-service/plugin';
import { DEPS, type WorkflowDeps } from './deps.ts';
import { leadSourcesPoint } from './leads.ts';
import { migrations } from './migrations/index.ts';
import { nodeTypesPoint } from './node-types.ts';
import { create, findById, generateDynamicLeads, getAvailableTools, getData, getFieldValues, getWorkflowTags, remove, update } from './operations.ts';
import { Workflow } from './workflow.entity.ts';
import { WorkflowService } from './workflow.service.ts';

/** WorkflowRpc: workflow graphs of a subscription, checked when saved; the values forms pick from; lead-generating tools. */
export const workflowPlugin = definePlugin<WorkflowDeps>({
  id: 'workflow',
  group: 'WorkflowRpc',
  coreVersion: '^2.0.0',
  deps: DEPS,
  entities: [Workflow],
  migrations,
  extensionPoints: [nodeTypesPoint, leadSourcesPoint],
  services: { workflowService: asClass(WorkflowService).singleton() },
  extends: {
    'core.collections': [
      {
        name: 'workflows',
        describe: "The subscription's workflows (fields as getData returns them).",
        fields: ['_id', 'name', 'description', 'contextId', 'projectId', 'userId', 'createdAt', 'updatedAt'],
        list: (ctx, query, deps) => (deps as WorkflowDeps).workflowService.listForCollection(ctx, query),
      },
    ],
  },
  operations: { create, update, delete: remove, findById, getData, getWorkflowTags, getFieldValues, getAvailableTools, generateDynamicLeads },
});
