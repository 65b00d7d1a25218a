import { availableParallelism } from 'node:os';
import { randomUUID } from 'node:crypto';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { pino } from 'pino';
import { createApp } from '../../core/app/app.ts';
import { loadConfig } from '../../core/base/config.ts';
import { WorkerPool } from '../../core/pool/worker-pool.ts';
import { LOCAL_BATCH } from '../../core/ai/ai-client.ts';
import { EMBEDDING_DIMENSIONS } from '../../core/ai/catalogue.ts';
import { vectorLiteral } from '../../core/ai/vector-type.ts';
import embed, { vectorsOf } from '../../workers/embed.ts';
import { createScratchDatabase } from '../support/database.ts';
import { TEST_MASTER_KEY } from '../support/harness.ts';
import { sentences } from './corpus.ts';

/**
 * `npm run bench` (third part), AI foundations:
 *   (1) local embedding throughput, texts/s: the worker pool (as the AI client
 *       uses it, batches of LOCAL_BATCH spread over WORKERS threads) against one thread
 *       embedding the same texts in this process;
 *   (2) with BENCH_DATABASE_URL (PostgreSQL with pgvector): recall@10 of
 *       MemoryRpc.recallMemories against exact search, and its p95 latency,
 *       at BENCH_MEMORIES (100,000) memories of 384 dimensions: all in one
 *       subscription (the HNSW index), and spread over 100 subscriptions
 *       (a 1% tenant filter), both as the service answers it (few
 *       candidates: exact) and forced through the index.
 */
const TEXTS = Number(process.env.BENCH_TEXTS ?? 20_000);
const MEMORIES = Number(process.env.BENCH_MEMORIES ?? 100_000);
const QUERIES = Number(process.env.BENCH_QUERIES ?? 200);
const TENANTS = 100;
const BATCH = LOCAL_BATCH;
const DATABASE_URL = process.env.BENCH_DATABASE_URL || undefined;

async function embeddingThroughput(): Promise<void> {
  const texts = sentences(TEXTS, 7);
  const batches: string[][] = [];
  for (let start = 0; start < texts.length; start += BATCH) batches.push(texts.slice(start, start + BATCH));

  let started = performance.now();
  for (const batch of batches) embed({ texts: batch, dimensions: EMBEDDING_DIMENSIONS });
  const oneThread = texts.length / ((performance.now() - started) / 1000);

  const size = availableParallelism();
  const pool = new WorkerPool({ size, logger: pino({ level: 'silent' }) });
  await Promise.all(Array.from({ length: size }, () => pool.run('embed', { texts: ['warm up'], dimensions: EMBEDDING_DIMENSIONS })));
  started = performance.now();
  await Promise.all(batches.map((batch) => pool.run('embed', { texts: batch, dimensions: EMBEDDING_DIMENSIONS })));
  const pooled = texts.length / ((performance.now() - started) / 1000);
  await pool.close();

  console.log(`\nlocal embeddings, ${TEXTS} texts of 8-20 words, batches of ${BATCH}`);
  console.log(`(1a) one thread                       ${oneThread.toFixed(0).padStart(8)} texts/s`);
  console.log(`(1b) worker pool, ${size} threads          ${pooled.toFixed(0).padStart(8)} texts/s`);
  console.log(`1b/1a = ${(pooled / oneThread).toFixed(2)}   (the pool's threads against one; at most ${size})`);
}

const percentile = (values: number[], p: number) => [...values].sort((a, b) => a - b)[Math.min(values.length - 1, Math.floor((values.length * p) / 100))]!;

/**
 * The service (auth and memory plugins) on a scratch database: memories
 * written straight into memory (with their embeddings), recalls made
 * through MemoryRpc.recallMemories in the process, exact answers by comparing
 * every candidate in SQL.
 */
async function recallQuality(baseUrl: string): Promise<void> {
  const scratch = await createScratchDatabase(baseUrl);
  const pool = new WorkerPool({ size: availableParallelism(), logger: pino({ level: 'silent' }) });
  const start = (exactSearchLimit: number) =>
    createApp({
      config: loadConfig({
        DATABASE_URL: scratch.url,
        MASTER_KEY: TEST_MASTER_KEY,
        DATA_DIR: mkdtempSync(path.join(tmpdir(), 'rpc-bench-')),
        LOG_LEVEL: 'silent',
        MEMORY_EXACT_SEARCH_LIMIT: String(exactSearchLimit),
      }),
      only: ['auth', 'memory'],
    });
  let app = await start(10_000);
  try {
    const db = () => app.deps.db;
    const texts = sentences(MEMORIES, 11);
    const embedAll = async (list: string[]) => {
      const batches: string[][] = [];
      for (let first = 0; first < list.length; first += 256) batches.push(list.slice(first, first + 256));
      const results = await Promise.all(
        batches.map((batch) => pool.run<{ vectors: Float32Array }>('embed', { texts: batch, dimensions: EMBEDDING_DIMENSIONS })),
      );
      return results.flatMap((result) => vectorsOf(result.vectors, EMBEDDING_DIMENSIONS));
    };
    const vectors = await embedAll(texts);
    const tenants = Array.from({ length: TENANTS }, () => randomUUID());
    const single = randomUUID();
    const [index] = await db().execute<{ indexdef: string }>(`select indexdef from pg_indexes where indexname = 'memory_embedding_a_index'`);

    /** Loads the memories with the index dropped, then builds it as the migration defines it (a bulk build, as after a restore). */
    const load = async (tenantOf: (row: number) => string) => {
      await db().execute('drop index memory_embedding_a_index');
      await db().execute('truncate memory');
      for (let first = 0; first < vectors.length; first += 1000) {
        const rows = Array.from({ length: Math.min(1000, vectors.length - first) }, (_, offset) => first + offset);
        await db().execute(
          `insert into memory (id, subscription_id, scope, user_id, content, content_hash, search_vector, metadata, embedding_a, created_at, updated_at)
           select gen_random_uuid(), s, 'global', null, c, 'bench-' || n, to_tsvector('english', c), '{}', e, now(), now()
           from unnest(?::uuid[], ?::text[], ?::vector[], ?::int[]) as t(s, c, e, n)`,
          // PostgreSQL array literals (the made-up words hold no quotes or commas): the driver would spread a JS array into a list.
          [
            `{${rows.map(tenantOf).join(',')}}`,
            `{${rows.map((row) => `"${texts[row]}"`).join(',')}}`,
            `{${rows.map((row) => `"${vectorLiteral(vectors[row]!)}"`).join(',')}}`,
            `{${rows.join(',')}}`,
          ],
        );
      }
      const started = performance.now();
      await db().execute(`set maintenance_work_mem = '512MB'`);
      await db().execute(index!.indexdef);
      // As autovacuum leaves a table after a bulk load: statistics, and the visibility map that lets counts read the index alone.
      await db().execute('vacuum analyze memory');
      // The load's pages written out now, not by the checkpointer while recalls are timed.
      await db().execute('checkpoint');
      return (performance.now() - started) / 1000;
    };

    // Questions about something remembered: six words of a stored memory, the usual case of a recall.
    const queryTexts = Array.from({ length: QUERIES }, (_, query) => texts[(query * 7919) % texts.length]!.split(' ').slice(2, 8).join(' '));
    const queryVectors = await embedAll(queryTexts);
    const exactTenth = async (subscriptionId: string, vector: number[]) => {
      const rows = await db().execute<{ distance: number }>(
        `with candidates as materialized (select embedding_a as embedding from memory where subscription_id = ?)
         select embedding <=> ?::vector as distance from candidates order by 1 limit 10`,
        [subscriptionId, vectorLiteral(vector)],
      );
      return Number(rows.at(-1)!.distance);
    };
    const measure = async (label: string, tenantOf: (query: number) => string) => {
      // One recall first: the worker thread that embeds queries starts on first use.
      await app
        .createCaller({ subscriptionId: tenantOf(0), userId: randomUUID(), role: 'admin', apiKeyId: null, sessionId: null, initialContext: null })
        .call('MemoryRpc.recallMemories', { scope: 'global', queryText: 'warm up', topK: 10 });
      const latencies: number[] = [];
      const answers: number[][] = [];
      for (const [query, text] of queryTexts.entries()) {
        const caller = app.createCaller({
          subscriptionId: tenantOf(query),
          userId: randomUUID(),
          role: 'admin',
          apiKeyId: null,
          sessionId: null,
          initialContext: null,
        });
        const started = performance.now();
        const result = (await caller.call('MemoryRpc.recallMemories', { scope: 'global', queryText: text, topK: 10 })) as { memories: { score: number }[] };
        latencies.push(performance.now() - started);
        answers.push(result.memories.map((memory) => 1 - memory.score));
      }
      // The exact answers after the timed recalls: comparing a tenant's every memory spills to disk and would slow the recall after it.
      let found = 0;
      for (const [query, distances] of answers.entries()) {
        // As near as the exact 10th counts: memories at equal distance are equally right answers.
        const tenth = await exactTenth(tenantOf(query), queryVectors[query]!);
        found += distances.filter((distance) => distance <= tenth + 1e-6).length;
      }
      console.log(
        `${label.padEnd(58)} recall@10 ${(found / (10 * QUERIES)).toFixed(3)}   median ${percentile(latencies, 50).toFixed(1)} ms   p95 ${percentile(latencies, 95).toFixed(1)} ms`,
      );
    };

    console.log(
      `\nMemoryRpc.recallMemories on PostgreSQL, ${MEMORIES} memories of ${EMBEDDING_DIMENSIONS} dimensions, ${QUERIES} recalls, topK 10 (p95 of the whole call, query embedding included)`,
    );
    let seconds = await load(() => single);
    await measure(`(2a) one subscription holds all (HNSW built in ${seconds.toFixed(0)} s)`, () => single);
    seconds = await load((row) => tenants[row % TENANTS]!);
    await measure(`(2b) 1% tenant filter: the tenant's 1,000 compared (exact)`, (query) => tenants[query % TENANTS]!);
    await app.close();
    app = await start(0);
    await measure('(2c) 1% tenant filter through HNSW (MEMORY_EXACT_SEARCH_LIMIT=0)', (query) => tenants[query % TENANTS]!);
    console.log('aim: recall@10 at least 0.95 and p95 under 20 ms');
  } finally {
    await app.close();
    await pool.close();
    await scratch.drop();
  }
}

await embeddingThroughput();
if (DATABASE_URL) await recallQuality(DATABASE_URL);
else console.log('\n(2) recall at 100,000 memories: set BENCH_DATABASE_URL to a PostgreSQL with pgvector');
