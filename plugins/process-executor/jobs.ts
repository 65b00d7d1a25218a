import * as v from 'valibot';
import { defineJob } from './deps.ts';

export const recover = defineJob({
  describe: 'Ends the records of processes whose node stopped (their lease ran out) and kills what is left of them on this machine; at start and every minute.',
  data: v.object({}),
  handler: ({ deps }) => deps.processExecutor.recover(),
  schedule: '* * * * *',
  concurrency: 1,
});
