import * as v from 'valibot';
import { switchModelJob } from 'rpc-service/plugin';
import { defineJob, type KnowledgeBaseDeps } from './deps.ts';

const records = v.object({ source: v.pipe(v.string(), v.minLength(1)), recordIds: v.array(v.pipe(v.string(), v.uuid())) });

export const embed = defineJob({
  describe: 'Embeds the chunks of records that wait for it (with all: every chunk again), with the active embedding model.',
  data: v.object({ ...records.entries, all: v.optional(v.boolean()) }),
  handler: async ({ data: { all, ...scope }, ctx, deps }) => ({
    embedded: await deps.knowledgeIndex.embedPending(ctx, { subscriptionId: ctx.subscriptionId!, ...scope }, Number.POSITIVE_INFINITY, { all }),
  }),
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

export const countWords = defineJob({
  describe: "Counts which words are common in a source's chunks: hybrid search takes its full-text candidates by the others.",
  data: v.object({ source: records.entries.source }),
  handler: async ({ data, ctx, deps }) => ({
    commonWords: await ctx.em.transactional((em) => deps.knowledgeIndex.countWords(ctx.subscriptionId!, em, data.source)),
  }),
});

export const ingest = defineJob({
  describe: 'Reads, parses, chunks and embeds one version of a knowledge-base document.',
  data: v.object({ ingestionId: v.pipe(v.string(), v.uuid()) }),
  handler: ({ data, ctx, deps, job }) => deps.ingestionService.runIngestion(ctx, data.ingestionId, job),
  concurrency: 4,
  timeoutSeconds: 1800,
});

export const switchModel = switchModelJob<KnowledgeBaseDeps>((deps) => deps.knowledgeIndex.embeddings, 'the search index');
