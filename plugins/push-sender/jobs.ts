import { broadcastParams } from './broadcast.ts';
import { defineJob } from './deps.ts';

export const broadcast = defineJob({
  describe: "Notify a broadcast's users in the app and push it to their devices.",
  data: broadcastParams,
  handler: ({ data, ctx, deps, job }) => deps.broadcastService.deliver(ctx, data, job),
  // A throw can only come before the first push (reading the audience or the keys, storing the in-app notifications): a retry pushes nothing twice.
  retry: { limit: 2 },
  // Each push is answered within PUSH_SEND_TIMEOUT_MS, PUSH_SEND_CONCURRENCY at a time: an hour is room for a very large audience.
  timeoutSeconds: 3600,
});
