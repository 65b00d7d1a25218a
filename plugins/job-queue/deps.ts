import { operationBuilder, type Deps } from 'rpc-service/plugin';

/** JobQueueRpc reads and retries through the core's view of the queue by subscription. */
export const DEPS = ['jobQueue'] as const;

export type JobQueueDeps = Deps<typeof DEPS>;

export const defineOperation = operationBuilder<JobQueueDeps>();
