import { randomUUID } from 'node:crypto';
import * as v from 'valibot';
import {
  EmbeddingColumns,
  jsonFilter,
  nearest,
  pgArray,
  rankBy,
  rankByWords,
  vectorLiteral,
  type SearchMode,
  type EmbeddingProgress,
  type AiCatalogue,
  type AiClient,
  type AuthenticatedContext,
  type Database,
  type EntityManager,
  type Jobs,
  type RequestContext,
  type RowOf,
  type WorkerPool,
  modulePath,
} from 'rpc-service/plugin';
import type { IndexChunk } from './chunk.entity.ts';
import { chunkHash, embeddingInput, type ChunkedSection, type ChunkOptions, type ChunkTask } from './chunker.ts';
import { countCommonWords, countedWords, COUNT_DELAY_SECONDS } from './text-ranking.ts';
import type { KnowledgeBaseConfig } from './config.ts';

const CHUNKER = modulePath(import.meta.url, './chunker.ts');
const CALLER = { type: 'plugin', name: 'knowledge-base' };
/** Chunks embedded per call to the model. */
const EMBED_BATCH = 128;
/** Chunks a search embeds itself before answering (those its scope still waits for); more are left to the job. */
export const SEARCH_CATCH_UP = 512;
/** The text search configuration of the full-text ranking: English stemming (installs, installing, installed match install). */
export const TEXT_SEARCH_CONFIG = 'english';

export interface IndexedText {
  /** Who indexes it (the plugin's name for its records): `documents`, `knowledge-base`. */
  source: string;
  recordId: string;
  /** What searches may be narrowed to (a documentation instance, a collection); null for none. */
  collection: string | null;
  title: string;
  markdown: string;
  /** Fields a search may filter on, with the list operators. */
  metadata: Record<string, unknown>;
}

/** A text chunked, ready to be written in a transaction. */
export interface PreparedText extends IndexedText {
  sections: ChunkedSection[];
}

export interface IndexWrite {
  chunks: number;
  /** Chunks that kept their embedding (unchanged since the last write). */
  unchanged: number;
  /** Chunks waiting for their embedding. */
  pending: number;
}

/** A chunk as getChunks and updateChunk answer it. */
export const INDEXED_CHUNK = v.strictObject({
  chunkId: v.string(),
  ordinal: v.number(),
  sectionId: v.string(),
  heading: v.string(),
  text: v.string(),
  /** Whether it has its embedding from the active model (until then searches by meaning do not find it). */
  embedded: v.boolean(),
});
export type IndexedChunk = v.InferOutput<typeof INDEXED_CHUNK>;

export interface SearchQuery {
  source: string;
  /** Only this collection; undefined: every collection of the source. */
  collection?: string | null;
  queryText: string;
  topK: number;
  /** List operators on metadata keys. */
  filter?: unknown;
  /** `semantic`: cosine similarity of embeddings. `text`: BM25 over the words. `hybrid`: both rankings, fused by reciprocal rank. */
  mode: SearchMode;
}

export interface SearchHit {
  chunkId: string;
  recordId: string;
  collection: string | null;
  heading: string;
  text: string;
  /** The whole section the chunk belongs to. */
  context: string;
  metadata: Record<string, unknown>;
  /** `semantic`: cosine similarity. `text`: the BM25 score. `hybrid`: the fused score, Σ weight/(RRF_K + rank) (`fuseRankings`). */
  score: number;
  /** Its place in each ranking (1 = first), null when not among the first 50 of it. */
  semanticRank: number | null;
  textRank: number | null;
}

/** A chunk as a search reads it, `context` the text of its section. */
type HitRow = RowOf<IndexChunk, 'id' | 'recordId' | 'collection' | 'heading' | 'text' | 'contentHash' | 'metadata'> & { context: string };

type Scope = { subscriptionId: string; source: string; recordIds?: string[]; collection?: string | null };

/**
 * The search index of texts (knowledge-base documents, documentation pages):
 * Markdown chunked by structure in the worker pool, chunks embedded by the
 * `embed` job (a search first embeds what its scope still waits for, so a
 * text is found as soon as its write has answered), searched by embedding
 * or by embedding and full text fused. A rewrite keeps the embeddings of
 * unchanged chunks. Every query is bound to the caller's subscription.
 */
export class KnowledgeIndex {
  readonly #pool: WorkerPool;
  readonly #jobs: Jobs;
  readonly #options: ChunkOptions;
  readonly #exactSearchLimit: number;
  /** The chunks' two embedding columns, and the switch from one model to another. */
  readonly embeddings: EmbeddingColumns;

  constructor({
    ai,
    db,
    aiCatalogue,
    pool,
    jobs,
    config,
  }: {
    ai: AiClient;
    db: Database;
    aiCatalogue: AiCatalogue;
    pool: WorkerPool;
    jobs: Jobs;
    config: KnowledgeBaseConfig;
  }) {
    this.#pool = pool;
    this.#jobs = jobs;
    this.#options = {
      chunkSize: config.KB_CHUNK_SIZE,
      overlap: Math.min(config.KB_CHUNK_OVERLAP, config.KB_CHUNK_SIZE / 2),
      sectionSize: config.KB_SECTION_SIZE,
    };
    this.#exactSearchLimit = config.KB_EXACT_SEARCH_LIMIT;
    this.embeddings = new EmbeddingColumns(
      { db, ai, aiCatalogue, jobs },
      {
        table: 'knowledge_base_chunk',
        hashColumn: 'content_hash',
        inputColumns: ['heading', 'text'],
        input: (row) => embeddingInput(row.heading!, row.text!),
        live: 'not withdrawn',
        job: 'switchModel',
        caller: CALLER,
      },
    );
  }

  /** The active model, and the subscription's progress of a switch under way. */
  embeddingStatus(ctx: AuthenticatedContext): Promise<EmbeddingProgress> {
    return this.embeddings.progress(ctx.em, { sql: 'subscription_id = ?', params: [ctx.subscriptionId] });
  }

  /** The subscription's chunks of a source: all, and those with their embedding from the active model. */
  async counts(ctx: AuthenticatedContext, source: string): Promise<{ total: number; embedded: number }> {
    const { active } = await this.embeddings.state(ctx.em);
    const [counts] = await ctx.em.execute<{ total: string; embedded: string }[]>(
      `select count(*) as total, count(${active}) as embedded from knowledge_base_chunk where subscription_id = ? and source = ? and not withdrawn`,
      [ctx.subscriptionId, source],
    );
    return { total: Number(counts!.total), embedded: Number(counts!.embedded) };
  }

  /** Chunks texts in the worker pool; call it before the transaction that writes them. */
  async prepare<T extends IndexedText>(texts: T[]): Promise<(T & PreparedText)[]> {
    if (texts.length === 0) return [];
    const task: ChunkTask = { documents: texts.map(({ title, markdown }) => ({ title, markdown })), options: this.#options };
    const chunked = await this.#pool.run<ChunkedSection[][]>(CHUNKER, task);
    return texts.map((text, index) => ({ ...text, sections: chunked[index]! }));
  }

  /**
   * Replaces what the index holds for a record, in `em`'s transaction: chunks
   * whose heading and text are unchanged keep their embeddings, the others
   * wait for the `embed` job (queued in the same transaction).
   */
  async write(ctx: AuthenticatedContext, em: EntityManager, text: PreparedText, { queueEmbedding = true } = {}): Promise<IndexWrite> {
    const { subscriptionId } = ctx;
    const existing = await em.execute<{ id: string; content_hash: string }[]>(
      'select id, content_hash from knowledge_base_chunk where subscription_id = ? and source = ? and record_id = ? and not withdrawn',
      [subscriptionId, text.source, text.recordId],
    );
    const reusable = new Map<string, string[]>();
    for (const row of existing) reusable.set(row.content_hash, [...(reusable.get(row.content_hash) ?? []), row.id]);

    const sections = text.sections.map((section) => ({ ...section, id: randomUUID() }));
    const kept: { id: string; sectionId: string; ordinal: number }[] = [];
    const added: { id: string; sectionId: string; ordinal: number; heading: string; text: string; hash: string }[] = [];
    let ordinal = 0;
    for (const section of sections) {
      for (const chunk of section.chunks) {
        const id = reusable.get(chunk.contentHash)?.pop();
        if (id) kept.push({ id, sectionId: section.id, ordinal });
        else added.push({ id: randomUUID(), sectionId: section.id, ordinal, heading: section.heading, text: chunk.text, hash: chunk.contentHash });
        ordinal += 1;
      }
    }
    const dropped = [...reusable.values()].flat();

    await em.execute('delete from knowledge_base_section where subscription_id = ? and source = ? and record_id = ?', [
      subscriptionId,
      text.source,
      text.recordId,
    ]);
    if (sections.length > 0) {
      await em.execute(
        `insert into knowledge_base_section (id, subscription_id, source, record_id, ordinal, heading, text)
         select s.id, ?, ?, ?, s.ordinal, s.heading, s.text from unnest(?::uuid[], ?::int[], ?::text[], ?::text[]) as s(id, ordinal, heading, text)`,
        [
          subscriptionId,
          text.source,
          text.recordId,
          pgArray(sections.map((section) => section.id)),
          pgArray(sections.map((_, index) => index)),
          pgArray(sections.map((section) => section.heading)),
          pgArray(sections.map((section) => section.text)),
        ],
      );
    }
    if (dropped.length > 0)
      await em.execute('delete from knowledge_base_chunk where subscription_id = ? and id = any(?::uuid[])', [subscriptionId, pgArray(dropped)]);
    const metadata = JSON.stringify(text.metadata);
    if (kept.length > 0) {
      await em.execute(
        `update knowledge_base_chunk set section_id = k.section_id, ordinal = k.ordinal, collection = ?, metadata = ?::jsonb, updated_at = now()
         from unnest(?::uuid[], ?::uuid[], ?::int[]) as k(id, section_id, ordinal) where knowledge_base_chunk.id = k.id and knowledge_base_chunk.subscription_id = ?`,
        [
          text.collection,
          metadata,
          pgArray(kept.map((chunk) => chunk.id)),
          pgArray(kept.map((chunk) => chunk.sectionId)),
          pgArray(kept.map((chunk) => chunk.ordinal)),
          subscriptionId,
        ],
      );
    }
    if (added.length > 0) {
      await em.execute(
        `insert into knowledge_base_chunk (id, subscription_id, source, record_id, collection, section_id, ordinal, heading, text, content_hash, metadata, search_vector, withdrawn, created_at, updated_at)
         select c.id, ?, ?, ?, ?, c.section_id, c.ordinal, c.heading, c.text, c.hash, ?::jsonb,
                to_tsvector('${TEXT_SEARCH_CONFIG}', c.heading || ' ' || c.text), false, now(), now()
         from unnest(?::uuid[], ?::uuid[], ?::int[], ?::text[], ?::text[], ?::text[]) as c(id, section_id, ordinal, heading, text, hash)`,
        [
          subscriptionId,
          text.source,
          text.recordId,
          text.collection,
          metadata,
          pgArray(added.map((chunk) => chunk.id)),
          pgArray(added.map((chunk) => chunk.sectionId)),
          pgArray(added.map((chunk) => chunk.ordinal)),
          pgArray(added.map((chunk) => chunk.heading)),
          pgArray(added.map((chunk) => chunk.text)),
          pgArray(added.map((chunk) => chunk.hash)),
        ],
      );
      if (queueEmbedding)
        await this.#jobs.enqueue(
          'embed',
          { source: text.source, recordIds: [text.recordId] },
          { ctx, em, key: `${subscriptionId}:${text.source}:${text.recordId}` },
        );
      await this.#countWordsLater(ctx, em, text.source);
    }
    return { chunks: kept.length + added.length, unchanged: kept.length, pending: added.length };
  }

  /** Changes what a record's chunks are filtered and narrowed by, without touching their text or embeddings. */
  async setMetadata(
    ctx: AuthenticatedContext,
    em: EntityManager,
    source: string,
    recordId: string,
    collection: string | null,
    metadata: Record<string, unknown>,
  ): Promise<void> {
    await em.execute(
      'update knowledge_base_chunk set collection = ?, metadata = ?::jsonb, updated_at = now() where subscription_id = ? and source = ? and record_id = ?',
      [collection, JSON.stringify(metadata), ctx.subscriptionId, source, recordId],
    );
  }

  /** A record's chunks in order, and whether each has its embedding from the active model. */
  async chunks(ctx: AuthenticatedContext, source: string, recordId: string): Promise<IndexedChunk[]> {
    const { active } = await this.embeddings.state(ctx.em);
    const rows = await ctx.em.execute<(RowOf<IndexChunk, 'id' | 'ordinal' | 'sectionId' | 'heading' | 'text'> & { embedded: boolean })[]>(
      `select id, ordinal, section_id, heading, text, ${active} is not null as embedded from knowledge_base_chunk
       where subscription_id = ? and source = ? and record_id = ? and not withdrawn order by ordinal`,
      [ctx.subscriptionId, source, recordId],
    );
    return rows.map((row) => ({
      chunkId: row.id,
      ordinal: row.ordinal,
      sectionId: row.section_id,
      heading: row.heading,
      text: row.text,
      embedded: row.embedded,
    }));
  }

  /** Replaces a chunk's text and embeds it at once with the active model (its old embedding answers until then); null when there is no such chunk. */
  async updateChunk(ctx: AuthenticatedContext, source: string, recordId: string, chunkId: string, text: string): Promise<IndexedChunk | null> {
    const [row] = await ctx.em.execute<RowOf<IndexChunk, 'id' | 'heading'>[]>(
      'select id, heading from knowledge_base_chunk where subscription_id = ? and source = ? and record_id = ? and id = ? and not withdrawn',
      [ctx.subscriptionId, source, recordId, chunkId],
    );
    if (!row) return null;
    await this.embeddings.embedAndWrite(ctx, [embeddingInput(row.heading, text)], (tx, { active, inactive }, [vector]) =>
      tx.execute(
        `update knowledge_base_chunk set text = ?, content_hash = ?, search_vector = to_tsvector('${TEXT_SEARCH_CONFIG}', heading || ' ' || ?),
           ${active} = ?::vector, ${inactive} = null, updated_at = now()
         where subscription_id = ? and id = ?`,
        [text, chunkHash(row.heading, text), text, vectorLiteral(vector!), ctx.subscriptionId, chunkId],
      ),
    );
    return (await this.chunks(ctx, source, recordId)).find((chunk) => chunk.chunkId === chunkId) ?? null;
  }

  /** Deletes one chunk; false when there is no such chunk. */
  async deleteChunk(ctx: AuthenticatedContext, source: string, recordId: string, chunkId: string): Promise<boolean> {
    const deleted = await ctx.em.execute<{ id: string }[]>(
      'delete from knowledge_base_chunk where subscription_id = ? and source = ? and record_id = ? and id = ? returning id',
      [ctx.subscriptionId, source, recordId, chunkId],
    );
    return deleted.length === 1;
  }

  /** Queues embedding every chunk of a record again with the active model; searches use the old embeddings until each is replaced. */
  async reembed(ctx: AuthenticatedContext, em: EntityManager, source: string, recordId: string): Promise<void> {
    await this.#jobs.enqueue('embed', { source, recordIds: [recordId], all: true }, { ctx, em, key: `${ctx.subscriptionId}:${source}:${recordId}:all` });
  }

  /** Takes records out of every search at once (in `em`'s transaction) and queues their removal. */
  async withdraw(ctx: AuthenticatedContext, em: EntityManager, source: string, recordIds: string[]): Promise<void> {
    if (recordIds.length === 0) return;
    await em.execute('update knowledge_base_chunk set withdrawn = true where subscription_id = ? and source = ? and record_id = any(?::uuid[])', [
      ctx.subscriptionId,
      source,
      pgArray(recordIds),
    ]);
    await this.#jobs.enqueue('cleanUp', { source, recordIds }, { ctx, em });
    await this.#countWordsLater(ctx, em, source);
  }

  /** Counts which words are common in a source's chunks (what hybrid search takes its full-text candidates by); the number kept. */
  countWords(subscriptionId: string, em: EntityManager, source: string): Promise<number> {
    return countCommonWords(em, subscriptionId, source);
  }

  /** One count for a burst of writes: while a count waits to start, the key drops the others. */
  async #countWordsLater(ctx: AuthenticatedContext, em: EntityManager, source: string): Promise<void> {
    await this.#jobs.enqueue('countWords', { source }, { ctx, em, key: `${ctx.subscriptionId}:${source}:words`, delaySeconds: COUNT_DELAY_SECONDS });
  }

  /** Deletes what the index holds for records. */
  async remove(subscriptionId: string, em: EntityManager, source: string, recordIds: string[]): Promise<number> {
    if (recordIds.length === 0) return 0;
    const ids = pgArray(recordIds);
    await em.execute('delete from knowledge_base_section where subscription_id = ? and source = ? and record_id = any(?::uuid[])', [
      subscriptionId,
      source,
      ids,
    ]);
    const removed = await em.execute<{ id: string }[]>(
      'delete from knowledge_base_chunk where subscription_id = ? and source = ? and record_id = any(?::uuid[]) returning id',
      [subscriptionId, source, ids],
    );
    return removed.length;
  }

  /**
   * Embeds the chunks of a scope that wait for it, with the active model, up
   * to `limit`; returns how many. Call it outside transactions (the AI
   * client writes its trace on a connection of its own). A chunk rewritten
   * meanwhile keeps waiting (its hash no longer matches).
   */
  async embedPending(ctx: RequestContext, scope: Scope, limit = Number.POSITIVE_INFINITY, { all = false } = {}): Promise<number> {
    let embedded = 0;
    // With `all`, every chunk is embedded again, in id order from where the last batch ended.
    let after = '00000000-0000-0000-0000-000000000000';
    while (embedded < limit) {
      const slots = await this.embeddings.state(ctx.em);
      const where = scopeCondition(scope);
      const rows = await ctx.em.execute<RowOf<IndexChunk, 'id' | 'heading' | 'text' | 'contentHash'>[]>(
        all
          ? `select id, heading, text, content_hash from knowledge_base_chunk where ${where.sql} and not withdrawn and id > ? order by id limit ?`
          : `select id, heading, text, content_hash from knowledge_base_chunk where ${where.sql} and not withdrawn and ${slots.active} is null order by record_id, ordinal limit ?`,
        [...where.params, ...(all ? [after] : []), Math.min(EMBED_BATCH, limit - embedded)],
      );
      if (rows.length === 0) break;
      const vectors = await this.embeddings.embed(
        ctx,
        slots,
        rows.map((row) => embeddingInput(row.heading, row.text)),
      );
      const written = await this.embeddings.write(ctx.em, slots, (tx) =>
        tx.execute(
          `update knowledge_base_chunk set ${slots.active} = v.embedding::vector from unnest(?::uuid[], ?::text[], ?::text[]) as v(id, hash, embedding)
           where knowledge_base_chunk.id = v.id and knowledge_base_chunk.content_hash = v.hash and knowledge_base_chunk.subscription_id = ?`,
          [
            pgArray(rows.map((row) => row.id)),
            pgArray(rows.map((row) => row.content_hash)),
            pgArray(vectors.map((vector) => vectorLiteral(vector))),
            scope.subscriptionId,
          ],
        ),
      );
      // The model changed meanwhile: the same rows again, with the new one.
      if (!written) continue;
      after = rows.at(-1)!.id;
      embedded += rows.length;
      if (rows.length < EMBED_BATCH) break;
    }
    return embedded;
  }

  /** The chunks closest to the query: by embedding (`semantic`), or by embedding and full text fused (`hybrid`). */
  async search(ctx: AuthenticatedContext, query: SearchQuery): Promise<SearchHit[]> {
    const scope: Scope = { subscriptionId: ctx.subscriptionId, source: query.source, collection: query.collection };
    const condition = jsonFilter(query.filter ?? {}, 'metadata');
    const base = scopeCondition(scope);
    const where = { sql: `${base.sql} and not withdrawn and (${condition.sql})`, params: [...base.params, ...condition.params] };
    const ranked = await rankBy(query.mode, query.topK, {
      byMeaning: async (depth) => {
        await this.embedPending(ctx, scope, SEARCH_CATCH_UP);
        const slots = await this.embeddings.state(ctx.em);
        const [vector] = await this.embeddings.embed(ctx, slots, [query.queryText]);
        const nearestRows = await nearest(ctx.em, {
          table: 'knowledge_base_chunk',
          column: slots.active,
          where,
          // Counted by scope and filter alone (an index-only count without a filter): withdrawn and unembedded chunks are few and fleeting.
          candidates: { sql: `${base.sql} and (${condition.sql})`, params: [...base.params, ...condition.params] },
          vector: vector!,
          limit: depth,
          exactSearchLimit: this.#exactSearchLimit,
        });
        return { rows: nearestRows.map((hit) => ({ id: hit.id, score: 1 - hit.distance })), weight: this.embeddings.hybridWeight(slots) };
      },
      byWords: (depth) =>
        rankByWords(ctx.em, {
          table: 'knowledge_base_chunk',
          column: 'search_vector',
          config: TEXT_SEARCH_CONFIG,
          scope: { sql: 'subscription_id = ? and source = ? and not withdrawn', params: [scope.subscriptionId, scope.source] },
          where,
          question: query.queryText,
          limit: depth,
          counted: countedWords(scope.subscriptionId, scope.source),
        }),
    });
    const rows = await this.#rows(
      ctx,
      ranked.map((entry) => entry.id),
    );
    return ranked.flatMap((entry) => (rows.has(entry.id) ? [toHit(rows.get(entry.id)!, entry.score, entry.semanticRank, entry.textRank)] : []));
  }

  async #rows(ctx: AuthenticatedContext, ids: string[]): Promise<Map<string, HitRow>> {
    if (ids.length === 0) return new Map();
    const rows = await ctx.em.execute<HitRow[]>(
      `select chunk.id, chunk.record_id, chunk.collection, chunk.heading, chunk.text, chunk.content_hash, chunk.metadata, coalesce(section.text, chunk.text) as context
       from knowledge_base_chunk chunk left join knowledge_base_section section on section.id = chunk.section_id and section.subscription_id = chunk.subscription_id
       where chunk.subscription_id = ? and chunk.id = any(?::uuid[])`,
      [ctx.subscriptionId, pgArray(ids)],
    );
    return new Map(rows.map((row) => [row.id, row]));
  }
}

function scopeCondition(scope: Scope): { sql: string; params: unknown[] } {
  let sql = 'subscription_id = ? and source = ?';
  const params: unknown[] = [scope.subscriptionId, scope.source];
  if (scope.collection !== undefined) {
    sql += scope.collection === null ? ' and collection is null' : ' and collection = ?';
    if (scope.collection !== null) params.push(scope.collection);
  }
  if (scope.recordIds !== undefined) {
    sql += ' and record_id = any(?::uuid[])';
    params.push(pgArray(scope.recordIds));
  }
  return { sql, params };
}

const toHit = (row: HitRow, score: number, semanticRank: number | null, textRank: number | null): SearchHit => ({
  chunkId: row.id,
  recordId: row.record_id,
  collection: row.collection,
  heading: row.heading,
  text: row.text,
  context: row.context,
  metadata: row.metadata,
  score,
  semanticRank,
  textRank,
});
