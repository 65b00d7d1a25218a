import * as v from 'valibot';
import { defineJob } from './deps.ts';

const records = v.object({ source: v.pipe(v.string(), v.minLength(1)), recordIds: v.array(v.pipe(v.string(), v.uuid())) });

export const embed = defineJob({
  describe: 'Embeds the chunks of records that wait for it, with the active embedding model.',
  data: records,
  handler: async ({ data, ctx, deps }) => ({ embedded: await deps.knowledgeIndex.embedPending(ctx, { subscriptionId: ctx.subscriptionId!, ...data }) }),
  concurrency: 2,
  timeoutSeconds: 900,
});

export const cleanUp = defineJob({
  describe: 'Removes the sections and chunks (with their vectors) of deleted records.',
  data: records,
  handler: async ({ data, ctx, deps }) => ({
    removed: await ctx.em.transactional((em) => deps.knowledgeIndex.remove(ctx.subscriptionId!, em, data.source, data.recordIds)),
  }),
});
