import { randomUUID } from 'node:crypto';
import {
  EmbeddingColumns,
  conflict,
  forbidden,
  jsonFilter,
  nearest,
  notFound,
  pgArray,
  rankBy,
  rankByWords,
  sha256Hex,
  validationError,
  vectorLiteral,
  type AiCatalogue,
  type AiClient,
  type AuthenticatedContext,
  type Database,
  type FieldsOf,
  type Jobs,
  type PluginServices,
  type RowOf,
  type SearchMode,
} from 'rpc-service/plugin';
import * as v from 'valibot';
import type { MemoryConfig } from './config.ts';
import { TEXT_SEARCH_CONFIG, type Memory, type Scope } from './memory.entity.ts';

/** Written by hand: a memory is `{id, content, metadata}` (plugins/memory/README.md), the row of a raw read of those columns (vector search), not an entity's record. */
export const MEMORY_RECORD = v.strictObject({ id: v.string(), content: v.string(), metadata: v.record(v.string(), v.unknown()) });
export type MemoryRecord = v.InferOutput<typeof MEMORY_RECORD>;

/** A recalled memory: its cosine similarity to the query (`semantic`), its BM25 score (`text`) or the fused score (`hybrid`) as `score`. */
export const RECALLED_MEMORY = v.strictObject({ ...MEMORY_RECORD.entries, score: v.number() });
export type RecalledMemory = v.InferOutput<typeof RECALLED_MEMORY>;

export interface Whose {
  scope: Scope;
  targetUserId?: string;
}

/** Roles that may act for another user of their subscription (`targetUserId`). */
const ACTING_ROLES = new Set(['agent', 'admin']);
const CALLER = { type: 'plugin', name: 'memory' };

/** Whose memories: userId null for global ones. */
type Owner = FieldsOf<Memory, 'scope' | 'userId'>;

/** A memory as a raw read of `id, content, metadata` answers it: its record. */
type RecordRow = RowOf<Memory, 'id' | 'content' | 'metadata'>;
type Found = RowOf<Memory, 'id' | 'scope' | 'userId' | 'content' | 'metadata' | 'createdAt'>;
/** The rows of an owner, in a form the (subscription, scope, user) index serves (`is not distinct from` would not use it). */
function ownerCondition(subscriptionId: string, owner: Owner): { sql: string; params: unknown[] } {
  return owner.userId === null
    ? { sql: 'subscription_id = ? and scope = ? and user_id is null', params: [subscriptionId, owner.scope] }
    : { sql: 'subscription_id = ? and scope = ? and user_id = ?', params: [subscriptionId, owner.scope, owner.userId] };
}

/**
 * Semantic memory: texts with metadata, per user or for the whole
 * subscription, recalled by the cosine similarity of their embeddings. Up to
 * MEMORY_EXACT_SEARCH_LIMIT candidates (after the tenant, owner and metadata
 * conditions) are all compared, exactly; more go through the HNSW index with
 * those conditions inside the vector query (iterative scans).
 */
export class MemoryService {
  readonly #users: PluginServices['userService'];
  readonly #exactSearchLimit: number;
  /** The memories' two embedding columns, and the switch from one model to another. */
  readonly embeddings: EmbeddingColumns;

  constructor({
    db,
    ai,
    aiCatalogue,
    jobs,
    userService,
    config,
  }: {
    db: Database;
    ai: AiClient;
    aiCatalogue: AiCatalogue;
    jobs: Jobs;
    userService: PluginServices['userService'];
    config: MemoryConfig;
  }) {
    this.#users = userService;
    this.#exactSearchLimit = config.MEMORY_EXACT_SEARCH_LIMIT;
    this.embeddings = new EmbeddingColumns(
      { db, ai, aiCatalogue, jobs },
      { table: 'memory', hashColumn: 'content_hash', inputColumns: ['content'], input: (row) => row.content!, job: 'switchModel', caller: CALLER },
    );
  }

  async saveMemory(
    ctx: AuthenticatedContext,
    whose: Whose,
    memory: { id?: string; content: string; metadata?: Record<string, unknown> },
  ): Promise<{ success: true; memoryId: string; message: string }> {
    const owner = await this.#owner(ctx, whose);
    const contentHash = sha256Hex(memory.content);
    const same = await this.#sameContent(ctx, owner, contentHash);
    if (memory.id === undefined && same) {
      if (memory.metadata !== undefined) await this.#setMetadata(ctx, same, memory.metadata);
      return { success: true, memoryId: same, message: 'A memory with this content already exists; it was kept' };
    }
    const existing = memory.id === undefined ? undefined : await this.#find(ctx, memory.id);
    if (existing && !(existing.scope === owner.scope && existing.user_id === owner.userId)) throw notFound(`Memory ${memory.id} not found in this scope`);
    if (same && same !== memory.id) throw conflict(`Another memory in this scope has the same content: ${same}`);

    const id = memory.id ?? randomUUID();
    const inserted = await this.embeddings.embedAndWrite(ctx, [memory.content], async (tx, { active, inactive }, [embedding]) => {
      if (existing) {
        await tx.execute(
          `update memory set content = ?, content_hash = ?, search_vector = to_tsvector('${TEXT_SEARCH_CONFIG}', ?), metadata = ?::jsonb,
             ${active} = ?::vector, ${inactive} = null, updated_at = now()
           where id = ? and subscription_id = ?`,
          [
            memory.content,
            contentHash,
            memory.content,
            JSON.stringify(memory.metadata ?? existing.metadata),
            vectorLiteral(embedding!),
            id,
            ctx.subscriptionId,
          ],
        );
        return null;
      }
      return tx.execute<RowOf<Memory, 'id'>[]>(
        `insert into memory (id, subscription_id, scope, user_id, content, content_hash, search_vector, metadata, ${active}, created_at, updated_at)
         values (?, ?, ?, ?, ?, ?, to_tsvector('${TEXT_SEARCH_CONFIG}', ?), ?::jsonb, ?::vector, clock_timestamp(), clock_timestamp())
         on conflict do nothing returning id`,
        [
          id,
          ctx.subscriptionId,
          owner.scope,
          owner.userId,
          memory.content,
          contentHash,
          memory.content,
          JSON.stringify(memory.metadata ?? {}),
          vectorLiteral(embedding!),
        ],
      );
    });
    if (inserted === null) return { success: true, memoryId: id, message: 'Memory updated' };
    if (inserted.length === 1) return { success: true, memoryId: id, message: 'Memory saved' };
    // Saved at the same moment by another call of this subscription, with the same id or content (ids are per subscription: see memory.entity.ts).
    const raced = await this.#sameContent(ctx, owner, contentHash);
    if (raced && memory.id === undefined) return { success: true, memoryId: raced, message: 'A memory with this content already exists; it was kept' };
    throw conflict(`Memory ${id} cannot be saved: the id or the content is taken`);
  }

  async recallMemories(
    ctx: AuthenticatedContext,
    whose: Whose,
    query: { queryText: string; topK: number; filter?: unknown; mode: SearchMode },
  ): Promise<{ success: true; memories: RecalledMemory[] }> {
    const owner = await this.#owner(ctx, whose);
    const condition = jsonFilter(query.filter ?? {}, 'metadata');
    const owned = ownerCondition(ctx.subscriptionId, owner);
    const where = { sql: `${owned.sql} and (${condition.sql})`, params: [...owned.params, ...condition.params] };
    const ranked = await rankBy(query.mode, query.topK, {
      byMeaning: async (depth) => {
        const slots = await this.embeddings.state(ctx.em);
        const [embedding] = await this.embeddings.embed(ctx, slots, [query.queryText]);
        const rows = await nearest(ctx.em, {
          table: 'memory',
          column: slots.active,
          where,
          vector: embedding!,
          limit: depth,
          exactSearchLimit: this.#exactSearchLimit,
        });
        return { rows: rows.map((row) => ({ id: row.id, score: 1 - row.distance })), weight: this.embeddings.hybridWeight(slots) };
      },
      byWords: (depth) =>
        rankByWords(ctx.em, {
          table: 'memory',
          column: 'search_vector',
          config: TEXT_SEARCH_CONFIG,
          scope: owned,
          where,
          question: query.queryText,
          limit: depth,
        }),
    });
    const rows = new Map(
      ranked.length === 0
        ? []
        : (
            await ctx.em.execute<RecordRow[]>('select id, content, metadata from memory where subscription_id = ? and id = any(?::uuid[])', [
              ctx.subscriptionId,
              pgArray(ranked.map((entry) => entry.id)),
            ])
          ).map((row) => [row.id, row]),
    );
    return { success: true, memories: ranked.flatMap((entry) => (rows.has(entry.id) ? [{ ...rows.get(entry.id)!, score: entry.score }] : [])) };
  }

  async deleteMemory(ctx: AuthenticatedContext, whose: Whose, memoryId: string): Promise<{ success: true; message: string }> {
    const owner = await this.#owner(ctx, whose);
    const owned = ownerCondition(ctx.subscriptionId, owner);
    const deleted = await ctx.em.execute<RowOf<Memory, 'id'>[]>(`delete from memory where id = ? and ${owned.sql} returning id`, [memoryId, ...owned.params]);
    if (deleted.length === 0) throw notFound(`Memory ${memoryId} not found in this scope`);
    return { success: true, message: 'Memory deleted' };
  }

  /** One memory of the scope; NOT_FOUND for one of another scope or owner, as for one that does not exist. */
  async getMemory(ctx: AuthenticatedContext, whose: Whose, memoryId: string): Promise<MemoryRecord> {
    const owner = await this.#owner(ctx, whose);
    const owned = ownerCondition(ctx.subscriptionId, owner);
    const [row] = await ctx.em.execute<RecordRow[]>(`select id, content, metadata from memory where id = ? and ${owned.sql}`, [memoryId, ...owned.params]);
    if (!row) throw notFound(`Memory ${memoryId} not found in this scope`);
    return row;
  }

  /**
   * Oldest first. `offset` a memory id: the page after that memory (cursor);
   * a number: that many skipped (index). `next_page_offset` continues in the
   * same mode (a cursor when none was given), null on the last page.
   */
  async listMemories(
    ctx: AuthenticatedContext,
    whose: Whose,
    page: { limit: number; offset?: string | number },
  ): Promise<{ success: true; memories: MemoryRecord[]; next_page_offset: string | number | null }> {
    const owner = await this.#owner(ctx, whose);
    const owned = ownerCondition(ctx.subscriptionId, owner);
    const params: unknown[] = [...owned.params];
    let after = '';
    if (typeof page.offset === 'string') {
      const cursor = await this.#find(ctx, page.offset);
      if (!cursor || cursor.scope !== owner.scope || cursor.user_id !== owner.userId) {
        throw validationError([{ path: 'offset', message: 'no memory with this id in this scope to continue after' }]);
      }
      after = ' and (created_at, id) > (?, ?)';
      params.push(cursor.created_at, cursor.id);
    }
    const skip = typeof page.offset === 'number' ? page.offset : 0;
    const rows = await ctx.em.execute<RecordRow[]>(
      `select id, content, metadata from memory where ${owned.sql}${after} order by created_at, id limit ? offset ?`,
      [...params, page.limit + 1, skip],
    );
    const more = rows.length > page.limit;
    const memories = rows.slice(0, page.limit);
    const next = !more ? null : typeof page.offset === 'number' ? skip + page.limit : memories.at(-1)!.id;
    return { success: true, memories, next_page_offset: next };
  }

  /** Whose memories a call touches: the caller's, another user's of the subscription (agents and admins only), or the subscription's. */
  async #owner(ctx: AuthenticatedContext, { scope, targetUserId }: Whose): Promise<Owner> {
    if (scope === 'global') return { scope, userId: null };
    if (targetUserId === undefined || targetUserId === ctx.userId) return { scope, userId: ctx.userId };
    if (!ACTING_ROLES.has(ctx.role)) throw forbidden('Only agents and admins may act for another user (targetUserId)');
    if (!(await this.#users.credentialHolder(ctx.subscriptionId, targetUserId))) throw notFound(`User ${targetUserId} not found`);
    return { scope, userId: targetUserId };
  }

  async #sameContent(ctx: AuthenticatedContext, owner: Owner, contentHash: string): Promise<string | undefined> {
    const owned = ownerCondition(ctx.subscriptionId, owner);
    const [row] = await ctx.em.execute<RowOf<Memory, 'id'>[]>(`select id from memory where ${owned.sql} and content_hash = ?`, [...owned.params, contentHash]);
    return row?.id;
  }

  async #find(ctx: AuthenticatedContext, id: string): Promise<Found | undefined> {
    const [row] = await ctx.em.execute<Found[]>('select id, scope, user_id, content, metadata, created_at from memory where id = ? and subscription_id = ?', [
      id,
      ctx.subscriptionId,
    ]);
    return row;
  }

  async #setMetadata(ctx: AuthenticatedContext, id: string, metadata: Record<string, unknown>): Promise<void> {
    await ctx.em.execute('update memory set metadata = ?::jsonb, updated_at = now() where id = ? and subscription_id = ?', [
      JSON.stringify(metadata),
      id,
      ctx.subscriptionId,
    ]);
  }
}
