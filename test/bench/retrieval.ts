import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import type { KnowledgeBaseAdminRpcSearchResult } from '../../clients/typescript/src/operations.ts';
import { callerAt, type Caller } from '../support/caller.ts';
import { createScratchDatabase } from '../support/database.ts';
import { startTestApp } from '../support/harness.ts';

/**
 * `npm run bench:retrieval` (and the last part of `npm run bench`): how well
 * the knowledge base finds things, on BEIR SciFact
 * (../shared/bench-data/beir-scifact/, BEIR's format; its SOURCE.md names the
 * sources). Its 5,183 abstracts are ingested one KnowledgeBaseAdminRpc.ingestText
 * each over HTTP, as a user would, until all are searchable; then its 300 test
 * queries go through KnowledgeBaseAdminRpc.search (topK 100, hits of one
 * document kept once) in each mode, graded by qrels/test.tsv: nDCG@10 and
 * recall@100 beside BEIR's published BM25 (0.665) and TAS-B (0.643), search
 * latency with one client and with 8. On the embedded database, or with
 * BENCH_DATABASE_URL on a scratch database of that PostgreSQL server.
 */
const DATA = process.env.BENCH_BEIR_DIR ?? fileURLToPath(new URL('../../../shared/bench-data/beir-scifact/', import.meta.url));
const DATABASE_URL = process.env.BENCH_DATABASE_URL || undefined;
const MODES = ['text', 'semantic', 'hybrid'] as const;
/** BEIR (Thakur et al., 2021), Table 2, SciFact nDCG@10. */
const PUBLISHED = { BM25: 0.665, 'TAS-B': 0.643 };
const AIMS = { text: 0.66, semantic: 0.6, hybrid: 0.7 };

interface Entry {
  _id: string;
  title?: string;
  text: string;
}

/** BEIR's JSON lines, CRLF or LF. */
const jsonLines = (file: string): Entry[] =>
  readFileSync(`${DATA}/${file}`, 'utf8')
    .split(/\r?\n/)
    .filter((line) => line.trim() !== '')
    .map((line) => JSON.parse(line) as Entry);

function qrels(): Map<string, Map<string, number>> {
  const graded = new Map<string, Map<string, number>>();
  for (const line of readFileSync(`${DATA}/qrels/test.tsv`, 'utf8').split(/\r?\n/).slice(1)) {
    const [query, document, score] = line.split('\t');
    if (!query || !document) continue;
    if (!graded.has(query)) graded.set(query, new Map());
    graded.get(query)!.set(document, Number(score));
  }
  return graded;
}

function ndcgAt10(ranked: string[], relevant: Map<string, number>): number {
  const gain = (grade: number, rank: number) => (2 ** grade - 1) / Math.log2(rank + 2);
  const dcg = ranked.slice(0, 10).reduce((sum, id, rank) => sum + gain(relevant.get(id) ?? 0, rank), 0);
  const ideal = [...relevant.values()]
    .sort((a, b) => b - a)
    .slice(0, 10)
    .reduce((sum, grade, rank) => sum + gain(grade, rank), 0);
  return ideal === 0 ? 0 : dcg / ideal;
}

const recallAt100 = (ranked: string[], relevant: Map<string, number>) =>
  [...relevant.keys()].filter((id) => ranked.slice(0, 100).includes(id)).length / relevant.size;
const percentile = (values: number[], p: number) => [...values].sort((a, b) => a - b)[Math.min(values.length - 1, Math.floor((values.length * p) / 100))]!;
const fixed = (value: number, digits = 3) => value.toFixed(digits);

/** The documents of a search's hits, best first, each once (BEIR grades documents; a document's chunks are one answer), never the query's own id. */
const documentsOf = (hits: KnowledgeBaseAdminRpcSearchResult, queryId: string) => [...new Set(hits.map((hit) => hit.name))].filter((id) => id !== queryId);

/** Runs `work` over `items` with `clients` at once; the latency of each, in ms. */
async function timed<T>(items: T[], clients: number, work: (item: T) => Promise<void>): Promise<number[]> {
  const latencies: number[] = [];
  let next = 0;
  await Promise.all(
    Array.from({ length: clients }, async () => {
      while (next < items.length) {
        const item = items[next++]!;
        const started = performance.now();
        await work(item);
        latencies.push(performance.now() - started);
      }
    }),
  );
  return latencies;
}

async function ingest(caller: Caller, corpus: Entry[]): Promise<number> {
  const started = performance.now();
  await timed(corpus, 8, async (entry) => {
    await caller.KnowledgeBaseAdminRpc.ingestText({ name: entry._id, content: `# ${entry.title ?? ''}\n\n${entry.text}`, format: 'markdown' });
  });
  for (;;) {
    const stats = await caller.KnowledgeBaseAdminRpc.getStats();
    const ready = stats.documents.byStatus.ready ?? 0;
    if (ready + (stats.documents.byStatus.failed ?? 0) >= corpus.length && stats.chunks.pending === 0) break;
    process.stdout.write(`\r  ingesting: ${ready} of ${corpus.length} documents ready, ${stats.chunks.pending} chunks waiting for their embedding   `);
    await new Promise((resolve) => setTimeout(resolve, 2000));
  }
  process.stdout.write('\n');
  return (performance.now() - started) / 1000;
}

async function main(): Promise<void> {
  const corpus = jsonLines('corpus.jsonl');
  const queries = new Map(jsonLines('queries.jsonl').map((query) => [query._id, query.text]));
  const graded = qrels();
  const tested = [...graded.keys()].filter((id) => queries.has(id));
  const scratch = DATABASE_URL ? await createScratchDatabase(DATABASE_URL) : undefined;
  const t = await startTestApp({ withNotes: false, plugins: ['auth', 'knowledge-base'], databaseUrl: scratch?.url, env: { LOG_LEVEL: 'warn' } });
  try {
    const admin = await t.signup();
    const caller = callerAt(t.url, { token: admin.token });
    console.log(`retrieval on BEIR SciFact (${corpus.length} documents, ${tested.length} queries), ${DATABASE_URL ? 'PostgreSQL' : 'the embedded database'}`);
    const seconds = await ingest(caller, corpus);
    console.log(`  ingestion until every document was searchable: ${fixed(seconds, 0)} s (${fixed(corpus.length / seconds, 1)} documents/s)`);
    for (const mode of MODES) {
      let ndcg = 0;
      let recall = 0;
      const one = await timed(tested, 1, async (id) => {
        const ranked = documentsOf(await caller.KnowledgeBaseAdminRpc.search({ queryText: queries.get(id)!, topK: 100, mode }), id);
        ndcg += ndcgAt10(ranked, graded.get(id)!);
        recall += recallAt100(ranked, graded.get(id)!);
      });
      const eight = await timed(tested, 8, async (id) => {
        await caller.KnowledgeBaseAdminRpc.search({ queryText: queries.get(id)!, topK: 100, mode });
      });
      console.log(
        `  ${mode.padEnd(8)} nDCG@10 ${fixed(ndcg / tested.length)} (aim ≥ ${AIMS[mode]}; BEIR: BM25 ${PUBLISHED.BM25}, TAS-B ${PUBLISHED['TAS-B']})` +
          `  recall@100 ${fixed(recall / tested.length)}` +
          `  p50/p95 ms: 1 client ${fixed(percentile(one, 50), 0)}/${fixed(percentile(one, 95), 0)}, 8 clients ${fixed(percentile(eight, 50), 0)}/${fixed(percentile(eight, 95), 0)}`,
      );
    }
  } finally {
    await t.close();
    await scratch?.drop();
  }
}

await main();
