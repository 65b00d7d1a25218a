import { asClass } from 'awilix';
import { definePlugin, entityScope, wireTimestamp } from 'rpc-service/plugin';
import * as v from 'valibot';
import { workflowSettings } from './config.ts';
import { DEPS, type WorkflowDeps } from './deps.ts';
import { WorkflowInstance } from './instance.entity.ts';
import { recover, resume } from './jobs.ts';
import { leadSourcesPoint } from './leads.ts';
import { migrations } from './migrations/index.ts';
import { nodeTypesPoint } from './node-types.ts';
import {
  cancelInstance,
  create,
  executeWorkflow,
  findById,
  generateDynamicLeads,
  getAvailableTools,
  getData,
  getFieldValues,
  getInstance,
  getWorkflowTags,
  listInstances,
  remove,
  sendEventToWorkflow,
  update,
} from './operations.ts';
import { PendingEvent } from './pending-event.entity.ts';
import { INSTANCE, WorkflowRunner } from './runner.ts';
import { NodeEffects } from './effects.ts';
import { Workflow } from './definition.entity.ts';
import { WORKFLOW, WorkflowService } from './workflow.service.ts';

declare module 'rpc-service/plugin' {
  interface PluginErrorCodes {
    /** executeWorkflow: the run ended failed; the message names the run and the node. */
    WORKFLOW_FAILED: 422;
  }
}

/** What each `workflow.*` event says of its run, as the run's record names it. */
const RUN = { instanceId: INSTANCE.entries._id, workflowId: INSTANCE.entries.workflowId, workflowName: INSTANCE.entries.workflowName };

/** WorkflowRpc: workflow graphs of a subscription, checked when saved and run durably; the values forms pick from; lead-generating tools. */
export const workflowPlugin = definePlugin<WorkflowDeps>({
  id: 'workflow',
  group: 'WorkflowRpc',
  coreVersion: '^2.0.0',
  config: workflowSettings,
  errors: { WORKFLOW_FAILED: 422 },
  deps: DEPS,
  entities: [Workflow, WorkflowInstance, PendingEvent],
  migrations,
  extensionPoints: [nodeTypesPoint, leadSourcesPoint],
  services: {
    workflowService: asClass(WorkflowService).singleton(),
    workflowRunner: asClass(WorkflowRunner).singleton(),
    nodeEffects: asClass(NodeEffects).singleton(),
  },
  extends: {
    'core.events': [
      {
        name: 'workflow.completed',
        describe: 'A run you started completed: {instanceId, workflowId, workflowName, output}.',
        payload: v.strictObject({ ...RUN, output: v.unknown() }),
      },
      {
        name: 'workflow.failed',
        describe: 'A run you started failed: {instanceId, workflowId, workflowName, error}.',
        payload: v.strictObject({ ...RUN, error: v.string() }),
      },
      {
        name: 'workflow.waiting',
        describe: 'A run you started waits: {instanceId, workflowId, workflowName, event} for an event, {..., until} for a time.',
        payload: v.union([v.strictObject({ ...RUN, event: v.string() }), v.strictObject({ ...RUN, until: wireTimestamp })]),
      },
    ],
    'core.collections': (deps) => [
      {
        name: 'workflows',
        describe: "The subscription's workflows (fields as getData returns them).",
        fields: Object.keys(WORKFLOW.fields),
        list: (ctx, query) => deps.workflowService.listForCollection(ctx, query),
      },
    ],
    'core.dataScopes': [entityScope({ name: 'workflows', describe: "The subscription's workflows, one JSON file each.", entity: Workflow })],
  },
  operations: {
    create,
    update,
    delete: remove,
    findById,
    getData,
    getWorkflowTags,
    getFieldValues,
    getAvailableTools,
    generateDynamicLeads,
    executeWorkflow,
    sendEventToWorkflow,
    listInstances,
    getInstance,
    cancelInstance,
  },
  jobs: { resume, recover },
  // Runs a stopped node left are taken up as soon as a node starts, not at the next minute.
  start: async ({ jobs }) => void (await jobs.enqueue('recover', {}, { key: 'start' })),
  stop: ({ workflowRunner, config }) => workflowRunner.drain(Math.min(config.WORKFLOW_RUN_TIMEOUT_MS, 10_000)),
});
