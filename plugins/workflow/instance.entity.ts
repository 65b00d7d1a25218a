import { defineEntity, type ChainLink, type InferEntity } from 'rpc-service/plugin';

export const INSTANCE_STATUSES = ['running', 'waiting', 'completed', 'failed', 'cancelled'] as const;
export type InstanceStatus = (typeof INSTANCE_STATUSES)[number];

/** One node run, as the instance's history keeps it. */
export interface Step {
  node: string;
  type: string;
  /** ISO 8601 time it ended. */
  at: string;
  status: 'done' | 'waiting' | 'failed';
  error?: string;
}

/**
 * A run of a workflow: where it is (`cursor`, the node it runs or waits
 * at), its variables and arguments, its status and history. A copy of the
 * graph is kept, so a workflow changed meanwhile does not change a run under
 * way. `leaseUntil` is how long the node running it may take before another
 * node takes it over (after a crash).
 */
export const WorkflowInstance = defineEntity({
  name: 'WorkflowInstance',
  tableName: 'workflow_instance',
  properties: (p) => ({
    subscriptionId: p.uuid().primary(),
    id: p.uuid().primary(),
    workflowId: p.uuid(),
    workflowName: p.text(),
    /** Who executed it: who sees it and hears of it. */
    userId: p.uuid(),
    /** Whose rights it runs with at most: the workflow's authors when it started, its starter, then whoever sent it an event. */
    chain: p.json<ChainLink[]>(),
    projectId: p.text().nullable(),
    status: p.enum([...INSTANCE_STATUSES]),
    graph: p.json<{ nodes: unknown[]; edges: unknown[] }>(),
    cursor: p.text(),
    variables: p.json<Record<string, unknown>>(),
    args: p.json<Record<string, unknown>>(),
    steps: p.integer(),
    /** Parts of the run started since it last got further (a checkpoint, a wait, its end): a run that keeps losing its thread or node at one point fails. */
    attempts: p.integer().default(0),
    history: p.json<Step[]>(),
    /** The event a `wait` node waits for. */
    waitingFor: p.text().nullable(),
    /** When a `delay` node ends. */
    wakeAt: p.datetime().nullable(),
    output: p.json<unknown>().nullable(),
    error: p.text().nullable(),
    leaseUntil: p.datetime().nullable(),
    createdAt: p.datetime(),
    updatedAt: p.datetime(),
    finishedAt: p.datetime().nullable(),
  }),
  indexes: [
    { properties: ['subscriptionId', 'workflowId', 'status', 'createdAt'] },
    { properties: ['subscriptionId', 'createdAt'] },
    // Runs whose node stopped: found by the recovery job.
    {
      name: 'workflow_instance_running_index',
      expression: 'create index "workflow_instance_running_index" on "workflow_instance" ("lease_until") where "status" = \'running\'',
    },
  ],
});
export type WorkflowInstance = InferEntity<typeof WorkflowInstance>;
