import * as v from 'valibot';
import { defineJob } from './deps.ts';

export const recoverRuns = defineJob({
  describe: 'Fires again the scheduled runs whose node stopped before they finished (every minute).',
  data: v.object({}),
  handler: ({ deps }) => deps.schedulerRunner.recover(),
  schedule: '* * * * *',
  concurrency: 1,
});
