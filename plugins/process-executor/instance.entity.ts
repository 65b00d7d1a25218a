import { defineEntity, type InferEntity } from 'rpc-service/plugin';

export const PROCESS_STATUSES = ['running', 'exited', 'failed', 'stopped'] as const;
export type ProcessStatus = (typeof PROCESS_STATUSES)[number];

/**
 * A process started by startProcess: what runs, on which node, and how it
 * ended. Its output and input live on the node running it; the latest
 * lines are kept here once it has ended.
 */
export const ProcessInstance = defineEntity({
  name: 'ProcessInstance',
  tableName: 'process_executor_instance',
  properties: (p) => ({
    subscriptionId: p.uuid().primary(),
    id: p.uuid().primary(),
    startedBy: p.uuid(),
    /** The bus node id of the node running it. */
    nodeId: p.text(),
    /** The machine and pid namespace of that node (host.ts: thisHost), null where unknown. */
    host: p.text().nullable(),
    /** The process's id there, and when it started (clock ticks since boot), so a reused pid is not taken for it. */
    pid: p.integer().nullable(),
    pidStartedAt: p.text().nullable(),
    /** Renewed by its node while it runs; past it, the recovery job takes the node for dead. */
    leaseUntil: p.datetime().nullable(),
    command: p.text(),
    args: p.array(),
    status: p.enum([...PROCESS_STATUSES]),
    exitCode: p.integer().nullable(),
    signal: p.text().nullable(),
    error: p.text().nullable(),
    logs: p.json<string[]>(),
    startedAt: p.datetime(),
    endedAt: p.datetime().nullable(),
  }),
  indexes: [
    { properties: ['subscriptionId', 'status'] },
    // Records whose node stopped: found by the recovery job.
    {
      name: 'process_executor_instance_running_index',
      expression: 'create index "process_executor_instance_running_index" on "process_executor_instance" ("lease_until") where "status" = \'running\'',
    },
  ],
});
export type ProcessInstance = InferEntity<typeof ProcessInstance>;
