import type * as v from 'valibot';
import { env, setting, settings } from 'rpc-service/plugin';

export const schedulerSettings = settings({
  SCHEDULER_POLL_MS: setting(env.integer(50, 60_000), 'how often each node looks for due tasks, in milliseconds', '250'),
  SCHEDULER_CONCURRENCY: setting(env.integer(1, 1000), 'actions of due tasks one node runs at once', '32'),
  SCHEDULER_RUN_LEASE_MS: setting(
    env.integer(10_000, 86_400_000),
    'how long a run may stay unfinished before it is fired again (its node stopped), in milliseconds',
    '300000',
  ),
  SCHEDULER_MAX_ATTEMPTS: setting(env.integer(1, 100), 'times a run is fired in all when its node keeps stopping before it finishes; then it fails', '3'),
});

export type SchedulerConfig = v.InferOutput<typeof schedulerSettings>;
