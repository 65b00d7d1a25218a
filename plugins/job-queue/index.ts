import { definePlugin } from 'rpc-service/plugin';
import { DEPS, type JobQueueDeps } from './deps.ts';
import { getCounts, listJobs, retryJob } from './operations.ts';

/**
 * JobQueueRpc: a subscription's view of the background job queue (every
 * plugin's jobs enqueued for it), for its staff and admins and the console.
 * The operator's view of every subscription is `rpc-service jobs`.
 */
export const jobQueuePlugin = definePlugin<JobQueueDeps>({
  id: 'job-queue',
  group: 'JobQueueRpc',
  coreVersion: '^2.0.0',
  deps: DEPS,
  operations: { getCounts, listJobs, retryJob },
});
