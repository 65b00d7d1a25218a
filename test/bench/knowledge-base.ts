import { randomUUID } from 'node:crypto';
import { mkdtempSync } from 'node:fs';
import { availableParallelism, tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { pino } from 'pino';
import type { AuthenticatedContext } from 'rpc-service/plugin';
import { createApp } from '../../core/app/app.ts';
import { LOCAL_BATCH } from '../../core/ai/ai-client.ts';
import { EMBEDDING_DIMENSIONS } from '../../core/ai/catalogue.ts';
import { loadConfig } from '../../core/base/config.ts';
import { WorkerPool } from '../../core/pool/worker-pool.ts';
import chunkDocuments, { embeddingInput, type ChunkedSection } from '../../plugins/knowledge-base/chunker.ts';
import { hybridWeightOf, loadCatalogue } from '../../core/ai/catalogue.ts';
import { fuseRankings } from '../../core/ai/ranking.ts';
import embed from '../../workers/embed.ts';
import { createScratchDatabase } from '../support/database.ts';
import { TEST_MASTER_KEY } from '../support/harness.ts';
import { madeUpText } from './corpus.ts';

/**
 * `npm run bench` (fourth part), the knowledge base:
 *   (1) ingestion throughput, pages/s: chunking and embedding Markdown pages
 *       (the CPU work of an ingestion) in the worker pool as the service does
 *       it, against one thread doing the same in this process;
 *   (2) with BENCH_DATABASE_URL (PostgreSQL with pgvector): the p95 of
 *       KnowledgeBaseAdminRpc.search over 10,000 and then 100,000 chunks of
 *       one subscription (BENCH_CHUNKS), hybrid (vector and full text fused)
 *       against semantic alone, with a `select 1` round trip as the baseline
 *       of the same run; and the recall of hybrid's top 5 against fusing with
 *       the full-text ranking of every match, as it was before being bounded.
 */
const PAGES = Number(process.env.BENCH_PAGES ?? 2000);
/** The index is grown to each size in turn and measured there. */
const SIZES = (process.env.BENCH_CHUNKS ?? '10000,100000').split(',').map(Number);
const QUERIES = Number(process.env.BENCH_QUERIES ?? 200);
const DATABASE_URL = process.env.BENCH_DATABASE_URL || undefined;
const CHUNKER = fileURLToPath(new URL('../../plugins/knowledge-base/chunker.ts', import.meta.url));
const OPTIONS = { chunkSize: 1000, overlap: 150, sectionSize: 4000 };
/** Pages per chunking task of the pool. */
const PAGE_BATCH = 16;

/** Deterministic Markdown pages of about 3 kB: a title, three sections of paragraphs and a list. */
function pages(count: number, seed: number): { title: string; markdown: string }[] {
  const text = madeUpText(seed);
  const paragraph = () => Array.from({ length: 3 + (text.word().length % 3) }, text.sentence).join('. ') + '.';
  return Array.from({ length: count }, (_, index) => ({
    title: `Page ${index} ${text.word()}`,
    markdown: [1, 2, 3]
      .map((section) => `## ${section}. ${text.word()} ${text.word()}\n\n${paragraph()}\n\n- ${text.sentence()}\n- ${text.sentence()}\n\n${paragraph()}`)
      .join('\n\n'),
  }));
}

const batches = <T>(items: T[], size: number): T[][] =>
  Array.from({ length: Math.ceil(items.length / size) }, (_, index) => items.slice(index * size, (index + 1) * size));
const inputsOf = (sections: ChunkedSection[]) => sections.flatMap((section) => section.chunks.map((chunk) => embeddingInput(section.heading, chunk.text)));
const percentile = (values: number[], p: number) => [...values].sort((a, b) => a - b)[Math.min(values.length - 1, Math.floor((values.length * p) / 100))]!;

async function ingestionThroughput(): Promise<void> {
  const corpus = pages(PAGES, 3);
  let started = performance.now();
  let chunks = 0;
  for (const group of batches(corpus, PAGE_BATCH)) {
    const inputs = chunkDocuments({ documents: group, options: OPTIONS }).flatMap(inputsOf);
    chunks += inputs.length;
    for (const texts of batches(inputs, LOCAL_BATCH)) embed({ texts, dimensions: EMBEDDING_DIMENSIONS });
  }
  const oneThread = PAGES / ((performance.now() - started) / 1000);

  const size = availableParallelism();
  const pool = new WorkerPool({ size, logger: pino({ level: 'silent' }) });
  // Threads start on first use: start them all before timing.
  await Promise.all(Array.from({ length: size }, () => pool.run(CHUNKER, { documents: corpus.slice(0, 1), options: OPTIONS })));
  await Promise.all(Array.from({ length: size }, () => pool.run('embed', { texts: ['warm up'], dimensions: EMBEDDING_DIMENSIONS })));
  started = performance.now();
  // As an ingestion does it: chunk a batch of pages in a worker, then embed its chunks in batches, every batch in flight at once.
  await Promise.all(
    batches(corpus, PAGE_BATCH).map(async (group) => {
      const chunked = await pool.run<ChunkedSection[][]>(CHUNKER, { documents: group, options: OPTIONS });
      await Promise.all(batches(chunked.flatMap(inputsOf), LOCAL_BATCH).map((texts) => pool.run('embed', { texts, dimensions: EMBEDDING_DIMENSIONS })));
    }),
  );
  const pooled = PAGES / ((performance.now() - started) / 1000);
  await pool.close();

  console.log(`\nknowledge-base ingestion, ${PAGES} Markdown pages of about 3 kB (${(chunks / PAGES).toFixed(1)} chunks each): chunking and local embedding`);
  console.log(`(1a) one thread                       ${oneThread.toFixed(0).padStart(8)} pages/s`);
  console.log(`(1b) worker pool, ${size} threads          ${pooled.toFixed(0).padStart(8)} pages/s`);
  console.log(`1b/1a = ${(pooled / oneThread).toFixed(2)}   (the pool's threads against one; at most ${size})`);
}

/** Today's ranking before it was bounded: every chunk holding any word of the question, by ts_rank_cd (the reference of the recall). */
const UNBOUNDED_TEXT = `select id from knowledge_base_chunk, to_tsquery('english', replace(websearch_to_tsquery('english', ?)::text, ' & ', ' | ')) as query
  where subscription_id = ? and source = 'knowledge-base' and not withdrawn and search_vector @@ query order by ts_rank_cd(search_vector, query) desc, id limit 50`;

/**
 * The service (auth and knowledge base) on a scratch database, grown to each
 * size of BENCH_CHUNKS in turn; chunks written through the index, searches
 * through the operation.
 */
async function searchLatency(baseUrl: string): Promise<void> {
  const scratch = await createScratchDatabase(baseUrl);
  const app = await createApp({
    config: loadConfig({
      DATABASE_URL: scratch.url,
      MASTER_KEY: TEST_MASTER_KEY,
      DATA_DIR: mkdtempSync(path.join(tmpdir(), 'rpc-bench-')),
      LOG_LEVEL: 'silent',
    }),
    only: ['auth', 'knowledge-base'],
  });
  try {
    const index = app.depsOf('knowledge-base').knowledgeIndex;
    const principal = { subscriptionId: randomUUID(), userId: randomUUID(), role: 'admin' as const, apiKeyId: null, sessionId: null, initialContext: null };
    const db = app.deps.db;
    const ctx = (em = db.forkEm(principal.subscriptionId)) =>
      ({ ...principal, requestId: randomUUID(), projectId: null, serviceCode: null, extra: {}, em, log: app.logger }) as unknown as AuthenticatedContext;
    const caller = app.createCaller(principal);
    let written = 0;
    let seed = 1;
    for (const size of SIZES) {
      const started = performance.now();
      for (; written < size; seed++) {
        const prepared = await index.prepare(
          pages(50, seed).map((page) => ({
            source: 'knowledge-base',
            recordId: randomUUID(),
            collection: null,
            title: page.title,
            markdown: page.markdown,
            metadata: { name: page.title, tags: [] },
          })),
        );
        await db.forkEm(principal.subscriptionId).transactional(async (em) => {
          for (const text of prepared) written += (await index.write(ctx(em), em, text, { queueEmbedding: false })).chunks;
        });
      }
      await index.embedPending(ctx(), { subscriptionId: principal.subscriptionId, source: 'knowledge-base' });
      // What the countWords job does a moment after the writes; then the table as autovacuum leaves it after a bulk load, its pages written out.
      const common = await db.forkEm(principal.subscriptionId).transactional((em) => index.countWords(principal.subscriptionId, em, 'knowledge-base'));
      await db.execute('vacuum analyze knowledge_base_chunk');
      await db.execute('checkpoint');
      const loadSeconds = (performance.now() - started) / 1000;

      // Each question: 5 to 8 words running in a chunk (its source).
      const sources = await db.execute<{ id: string; text: string }>('select id, text from knowledge_base_chunk order by id limit ?', [QUERIES]);
      const questions = sources.map((row, index) => ({
        source: row.id,
        text: row.text
          .split(/\s+/)
          .slice(3, 3 + 5 + (index % 4))
          .join(' '),
      }));
      const time = async (run: (question: string) => Promise<unknown>) => {
        await run('warm up');
        const latencies: number[] = [];
        for (const question of questions) {
          const begun = performance.now();
          await run(question.text);
          latencies.push(performance.now() - begun);
        }
        return latencies;
      };
      const search = (queryText: string, extra: object = {}) =>
        caller.call('KnowledgeBaseAdminRpc.search', { queryText, topK: 5, ...extra }) as Promise<{ chunkId: string }[]>;
      const roundTrip = await time(() => db.execute('select 1'));
      const semantic = await time((queryText) => search(queryText, { mode: 'semantic' }));
      const hybrid = await time((queryText) => search(queryText));
      const unbounded = await time((queryText) => db.execute(UNBOUNDED_TEXT, [queryText, principal.subscriptionId]));

      // Recall: the fused top 5 against the fusion of the same semantic ranking with the unbounded full-text one, weighted as the service weighs them.
      const catalogue = loadCatalogue();
      const meaningWeight = hybridWeightOf(catalogue, catalogue.defaults.embedding!);
      let kept = 0;
      let foundBounded = 0;
      let foundUnbounded = 0;
      for (const question of questions) {
        const bounded = (await search(question.text)).map((hit) => hit.chunkId);
        const nearest = (await search(question.text, { mode: 'semantic', topK: 50 })).map((hit) => hit.chunkId);
        const textual = (await db.execute<{ id: string }>(UNBOUNDED_TEXT, [question.text, principal.subscriptionId])).map((row) => row.id);
        const reference = fuseRankings(nearest, textual, 5, { meaningWeight }).map((entry) => entry.id);
        kept += bounded.filter((id) => reference.includes(id)).length / reference.length;
        if (bounded.includes(question.source)) foundBounded += 1;
        if (reference.includes(question.source)) foundUnbounded += 1;
      }

      console.log(
        `\nKnowledgeBaseAdminRpc.search on PostgreSQL, ${written} chunks of one subscription (written and embedded in ${loadSeconds.toFixed(0)} s; ${common} common words), ${QUERIES} questions, topK 5`,
      );
      const line = (label: string, values: number[]) =>
        console.log(`${label.padEnd(52)} median ${percentile(values, 50).toFixed(1).padStart(6)} ms   p95 ${percentile(values, 95).toFixed(1).padStart(6)} ms`);
      line('(2a) select 1 round trip (baseline)', roundTrip);
      line('(2b) semantic (embedding only)', semantic);
      line('(2c) hybrid (embedding and full text fused)', hybrid);
      line('(2d) the unbounded full-text ranking alone (reference)', unbounded);
      console.log(
        `2c/2b p95 = ${(percentile(hybrid, 95) / percentile(semantic, 95)).toFixed(2)}   (aim: at most 1.5; hybrid p95 under 50 ms at 100,000 chunks)`,
      );
      console.log(
        `recall of the fused top 5 against the unbounded fusion: ${(kept / questions.length).toFixed(3)}; question's own chunk in the top 5: bounded ${foundBounded}, unbounded ${foundUnbounded} of ${questions.length}`,
      );
    }
  } finally {
    await app.close();
    await scratch.drop();
  }
}

await ingestionThroughput();
if (DATABASE_URL) await searchLatency(DATABASE_URL);
else console.log('\n(2) search at 10,000 and 100,000 chunks: set BENCH_DATABASE_URL to a PostgreSQL with pgvector');
