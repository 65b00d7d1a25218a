import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { hybridWeightOf, loadCatalogue } from '../../core/ai/catalogue.ts';
import { fuseRankings, FUSION_DEPTH, RRF_K, type SearchMode } from '../../core/ai/ranking.ts';
import { callerAt, type Caller } from '../support/caller.ts';
import { createScratchDatabase } from '../support/database.ts';
import { startTestApp } from '../support/harness.ts';

/**
 * `npm run bench:retrieval` (and the last part of `npm run bench`): how well
 * the knowledge base and memory find things, on BEIR SciFact
 * (../shared/bench-data/beir-scifact/, BEIR's format; its SOURCE.md names the
 * sources). Its 5,183 abstracts are ingested one KnowledgeBaseAdminRpc.ingestText
 * each over HTTP, as a user would, until all are searchable, and saved as
 * memories of one user (MemoryRpc.saveMemory). Its 300 test queries then go
 * through KnowledgeBaseAdminRpc.search and MemoryRpc.recallMemories (topK 100,
 * hits of one document kept once) in each mode, graded by qrels/test.tsv:
 * nDCG@10 and recall@100 beside BEIR's published BM25 (0.665) and TAS-B
 * (0.643), search latency with one client and with 8. The rankings by meaning
 * and by words alone are then fused again at other constants, to show where
 * the shipped ones stand. On the embedded database, or with
 * BENCH_DATABASE_URL on a scratch database of that PostgreSQL server.
 */
const DATA = process.env.BENCH_BEIR_DIR ?? fileURLToPath(new URL('../../../shared/bench-data/beir-scifact/', import.meta.url));
const DATABASE_URL = process.env.BENCH_DATABASE_URL || undefined;
const MODES = ['text', 'semantic', 'hybrid'] as const;
/** BEIR (Thakur et al., 2021), Table 2, SciFact nDCG@10. */
const PUBLISHED = { BM25: 0.665, 'TAS-B': 0.643 };
const AIMS = {
  knowledge: { text: 0.66, semantic: 0.6, hybrid: 0.7 },
  memory: { text: 0.66, semantic: 0.6, hybrid: 0.68 },
  /** Seconds until every document is searchable. */
  ingestion: DATABASE_URL ? 120 : 180,
  /** Search p95 with one client, ms; with 8, at most 4× that. */
  p95: DATABASE_URL ? 60 : 120,
};
/** The default embedding model's weight in hybrid search, as the service takes it from the catalogue. */
const CATALOGUE = loadCatalogue();
const MEANING_WEIGHT = hybridWeightOf(CATALOGUE, CATALOGUE.defaults.embedding!);
/** Fusion constants tried beside the shipped ones. */
const FUSION_GRID = { k: [10, 30, 60, 100], meaningWeight: [...new Set([0, 0.05, 0.1, 0.2, 0.3, 0.5, 1, MEANING_WEIGHT])], depth: [FUSION_DEPTH, 100] };

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

/** A hit: the id of what was found (chunk, memory) and of its document. */
interface Hit {
  id: string;
  document: string;
}
type Search = (queryText: string, mode: SearchMode) => Promise<Hit[]>;

/** The documents of a search's hits, best first, each once (BEIR grades documents; a document's chunks are one answer), never the query's own id. */
const documentsOf = (hits: Hit[], queryId: string) => [...new Set(hits.map((hit) => hit.document))].filter((id) => id !== queryId);

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

const title = (entry: Entry) => `# ${entry.title ?? ''}\n\n${entry.text}`;

async function ingestDocuments(caller: Caller, corpus: Entry[]): Promise<number> {
  const started = performance.now();
  await timed(corpus, 8, async (entry) => {
    await caller.KnowledgeBaseAdminRpc.ingestText({ name: entry._id, content: title(entry), format: 'markdown' });
  });
  for (;;) {
    const stats = await caller.KnowledgeBaseAdminRpc.getStats();
    const ready = stats.documents.byStatus.ready ?? 0;
    if (ready + (stats.documents.byStatus.failed ?? 0) >= corpus.length && stats.chunks.pending === 0) break;
    process.stdout.write(`\r  ingesting: ${ready} of ${corpus.length} documents ready, ${stats.chunks.pending} chunks waiting for their embedding   `);
    await new Promise((resolve) => setTimeout(resolve, 1000));
  }
  process.stdout.write('\n');
  return (performance.now() - started) / 1000;
}

async function saveMemories(caller: Caller, corpus: Entry[]): Promise<number> {
  const started = performance.now();
  await timed(corpus, 8, async (entry) => {
    await caller.MemoryRpc.saveMemory({ scope: 'user', memory: { content: title(entry), metadata: { document: entry._id } } });
  });
  return (performance.now() - started) / 1000;
}

interface Graded {
  ndcg: number;
  recall: number;
}

/** nDCG@10 and recall@100 of rankings (query id → documents best first), averaged over the queries. */
function grade(rankings: Map<string, string[]>, graded: Map<string, Map<string, number>>): Graded {
  let ndcg = 0;
  let recall = 0;
  for (const [id, ranked] of rankings) {
    ndcg += ndcgAt10(ranked, graded.get(id)!);
    recall += recallAt100(ranked, graded.get(id)!);
  }
  return { ndcg: ndcg / rankings.size, recall: recall / rankings.size };
}

/** Each mode's figures for one search, and the rankings by meaning and by words fused again at FUSION_GRID's constants. */
async function measure(
  label: string,
  aims: Record<SearchMode, number>,
  search: Search,
  queries: Map<string, string>,
  graded: Map<string, Map<string, number>>,
) {
  const tested = [...graded.keys()].filter((id) => queries.has(id));
  const hitsOf = new Map<SearchMode, Map<string, Hit[]>>();
  for (const mode of MODES) {
    const hits = new Map<string, Hit[]>();
    const one = await timed(tested, 1, async (id) => {
      hits.set(id, await search(queries.get(id)!, mode));
    });
    const eight = await timed(tested, 8, async (id) => {
      await search(queries.get(id)!, mode);
    });
    hitsOf.set(mode, hits);
    const { ndcg, recall } = grade(new Map([...hits].map(([id, found]) => [id, documentsOf(found, id)])), graded);
    const p95 = percentile(one, 95);
    const p95Eight = percentile(eight, 95);
    console.log(
      `  ${label} ${mode.padEnd(8)} nDCG@10 ${fixed(ndcg)} (aim ≥ ${aims[mode]}${ndcg >= aims[mode] ? '' : ', not met'}; BEIR: BM25 ${PUBLISHED.BM25}, TAS-B ${PUBLISHED['TAS-B']})` +
        `  recall@100 ${fixed(recall)}` +
        `  p50/p95 ms: 1 client ${fixed(percentile(one, 50), 0)}/${fixed(p95, 0)} (aim ≤ ${AIMS.p95}${p95 <= AIMS.p95 ? '' : ', not met'}),` +
        ` 8 clients ${fixed(percentile(eight, 50), 0)}/${fixed(p95Eight, 0)} (aim ≤ ${4 * AIMS.p95}${p95Eight <= 4 * AIMS.p95 ? '' : ', not met'})`,
    );
  }
  // The shipped fusion and others, over the same two rankings (each 100 deep, as searched above).
  const tried: { k: number; meaningWeight: number; depth: number; ndcg: number; recall: number }[] = [];
  for (const k of FUSION_GRID.k)
    for (const meaningWeight of FUSION_GRID.meaningWeight)
      for (const depth of FUSION_GRID.depth) {
        const rankings = new Map(
          tested.map((id) => {
            const semantic = hitsOf.get('semantic')!.get(id)!.slice(0, depth);
            const textual = hitsOf.get('text')!.get(id)!.slice(0, depth);
            const documentOf = new Map([...semantic, ...textual].map((hit) => [hit.id, hit.document]));
            const fused = fuseRankings(
              semantic.map((hit) => hit.id),
              textual.map((hit) => hit.id),
              100,
              { k, meaningWeight },
            );
            return [
              id,
              documentsOf(
                fused.map((entry) => ({ id: entry.id, document: documentOf.get(entry.id)! })),
                id,
              ),
            ];
          }),
        );
        tried.push({ k, meaningWeight, depth, ...grade(rankings, graded) });
      }
  tried.sort((a, b) => b.ndcg - a.ndcg);
  const shipped = tried.find((row) => row.k === RRF_K && row.meaningWeight === MEANING_WEIGHT && row.depth === FUSION_DEPTH)!;
  const named = (row: (typeof tried)[number]) => `k ${row.k}, weight ${row.meaningWeight}, depth ${row.depth}: ${fixed(row.ndcg)}`;
  const best = [...tried.slice(0, 3), tried.find((row) => row.meaningWeight > 0)!].map(named);
  console.log(
    `  ${label} fusion: shipped (k ${RRF_K}, weight of meaning ${MEANING_WEIGHT}, depth ${FUSION_DEPTH}) ${fixed(shipped.ndcg)}; best tried ${best.slice(0, 3).join('; ')}; best with meaning counted ${best[3]}`,
  );
}

async function main(): Promise<void> {
  const corpus = jsonLines('corpus.jsonl');
  const queries = new Map(jsonLines('queries.jsonl').map((query) => [query._id, query.text]));
  const graded = qrels();
  const scratch = DATABASE_URL ? await createScratchDatabase(DATABASE_URL) : undefined;
  const t = await startTestApp({ withNotes: false, plugins: ['auth', 'knowledge-base', 'memory'], databaseUrl: scratch?.url, env: { LOG_LEVEL: 'warn' } });
  try {
    const admin = await t.signup();
    const caller = callerAt(t.url, { token: admin.token });
    console.log(
      `retrieval on BEIR SciFact (${corpus.length} documents, ${[...graded.keys()].length} queries), ${DATABASE_URL ? 'PostgreSQL' : 'the embedded database'}`,
    );
    const seconds = await ingestDocuments(caller, corpus);
    console.log(
      `  knowledge base: every document searchable after ${fixed(seconds, 0)} s (${fixed(corpus.length / seconds, 1)} documents/s; aim ≤ ${AIMS.ingestion} s${seconds <= AIMS.ingestion ? '' : ', not met'})`,
    );
    await measure(
      'knowledge base',
      AIMS.knowledge,
      async (queryText, mode) =>
        (await caller.KnowledgeBaseAdminRpc.search({ queryText, topK: 100, mode })).map((hit) => ({ id: hit.chunkId, document: hit.name })),
      queries,
      graded,
    );
    const memorySeconds = await saveMemories(caller, corpus);
    console.log(`  memory: ${corpus.length} memories saved in ${fixed(memorySeconds, 0)} s (${fixed(corpus.length / memorySeconds, 1)} memories/s)`);
    await measure(
      'memory',
      AIMS.memory,
      async (queryText, mode) =>
        (await caller.MemoryRpc.recallMemories({ scope: 'user', queryText, topK: 100, mode })).memories.map((memory) => ({
          id: memory.id,
          document: String(memory.metadata.document),
        })),
      queries,
      graded,
    );
    console.log(
      `  resident memory of this process (service and bench clients, the model in its worker threads): ${fixed(process.memoryUsage().rss / 2 ** 20, 0)} MiB`,
    );
  } finally {
    await t.close();
    await scratch?.drop();
  }
}

await main();
