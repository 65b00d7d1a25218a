import * as v from 'valibot';
import { defineJob } from './deps.ts';

export const resume = defineJob({
  describe: 'Takes up a workflow run whose delay has ended.',
  data: v.object({ instanceId: v.pipe(v.string(), v.uuid()) }),
  handler: ({ data, ctx, deps }) => deps.workflowRunner.wake(ctx.subscriptionId!, data.instanceId),
  timeoutSeconds: 3600,
});

export const recover = defineJob({
  describe: 'Takes over workflow runs whose node stopped (their lease ran out), and delays whose resume job was lost; at start and every minute.',
  data: v.object({}),
  handler: ({ deps }) => deps.workflowRunner.recover(),
  schedule: '* * * * *',
  concurrency: 1,
});
