import assert from 'node:assert/strict';
import type { WorkflowRpcCreateParams, WorkflowRpcExecuteWorkflowResult } from '../../clients/typescript/src/operations.ts';

type Node = NonNullable<WorkflowRpcCreateParams['nodes']>[number];

/** A workflow graph: start, then each node in turn, then an end node `done` answering `output` (an expression), or the variables without it. */
export function linearGraph(nodes: Node[], output?: string): Required<Pick<WorkflowRpcCreateParams, 'nodes' | 'edges'>> {
  const ids = ['start', ...nodes.map((node) => node.id), 'done'];
  return {
    nodes: [{ id: 'start', type: 'start' }, ...nodes, { id: 'done', type: 'end', config: output === undefined ? {} : { output } }],
    edges: ids.slice(1).map((target, index) => ({ source: ids[index]!, target })),
  };
}

/** The run a started workflow waits in (WorkflowRpc.executeWorkflow answers `{status: 'waiting', instanceId}` then): its instance id. */
export function waitingRun(started: WorkflowRpcExecuteWorkflowResult): string {
  assert.ok('status' in started, `the run waits: ${JSON.stringify(started)}`);
  assert.equal(started.status, 'waiting');
  return started.instanceId;
}

/** What a run that ended at once answers (WorkflowRpc.executeWorkflow's `{result}` then). */
export function completedRun(started: WorkflowRpcExecuteWorkflowResult): Extract<WorkflowRpcExecuteWorkflowResult, { result: unknown }>['result'] {
  assert.ok('result' in started, `the run ended: ${JSON.stringify(started)}`);
  return started.result;
}
