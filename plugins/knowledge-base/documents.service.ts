import * as v from 'valibot';
import {
  conflict,
  defineRecord,
  LockMode,
  notFound,
  type AuthenticatedContext,
  type EntityManager,
  type Extensions,
  type InferRecord,
  type SearchMode,
  type UploadService,
} from 'rpc-service/plugin';
import type { KnowledgeBaseConfig } from './config.ts';
import { DocumentVersion } from './document-version.entity.ts';
import { KnowledgeDocument, SOURCE_TYPES, STATUSES, type DocumentStatus, type SourceType } from './document.entity.ts';
import { Ingestion, INGESTION_STATES, type IngestionState } from './ingestion.entity.ts';
import { TEXT_SEARCH_CONFIG, type IndexedChunk, type KnowledgeIndex } from './knowledge-index.ts';
import { loadedParsers } from './parsers.ts';

/** The knowledge base's records in the search index. */
export const SOURCE = 'knowledge-base';
/** The upload purpose of files to ingest (its limits: IngestionService.uploadLimits). */
export const FILE_PURPOSE = 'knowledge-base-file';

export interface DocumentMetadata {
  name?: string;
  description?: string;
  collection?: string | null;
  tags?: string[];
  userId?: string | null;
  contactId?: string | null;
  projectId?: string | null;
}

const DOCUMENT = defineRecord(KnowledgeDocument, { hide: ['subscriptionId', 'searchVector'] });
/** A version as getDocumentVersions lists it: not its text (source, markdown), which stay with the document. */
const VERSION = defineRecord(DocumentVersion, { hide: ['id', 'subscriptionId', 'documentId', 'source', 'markdown'] });
export type DocumentRecord = InferRecord<typeof DOCUMENT>;

/** A date as the records carry it. */
/** The document as operations answer it. */
export const DOCUMENT_SCHEMA = v.strictObject({
  ...DOCUMENT.entries,
  // The derived schema takes any value for tags (a JSON column) and any text for the enumerations.
  tags: v.array(v.string()),
  sourceType: v.picklist(SOURCE_TYPES),
  status: v.picklist(STATUSES),
});
/** A version as getDocumentVersions answers it: `current` when the document is at it. */
export const VERSION_SCHEMA = v.strictObject({ ...VERSION.entries, current: v.boolean() });

export interface ListDocumentsQuery {
  userId?: string;
  contactId?: string;
  docType?: string;
  sourceType?: SourceType;
  tags?: string[];
  status?: DocumentStatus;
  collection?: string | null;
  search?: string;
  page: number;
  limit: number;
  sortBy: SortField;
  sortDir: 'asc' | 'desc';
  startTime?: Date;
  endTime?: Date;
  projectId?: string;
}

export const SORT_FIELDS = {
  createdAt: 'created_at',
  updatedAt: 'updated_at',
  name: 'lower(name)',
  status: 'status',
  sizeBytes: 'size_bytes',
  chunkCount: 'chunk_count',
} as const;
export type SortField = keyof typeof SORT_FIELDS;

export const toRecord = DOCUMENT.toRecord;

/** What the index keeps with each chunk, for search filters. */
export const searchMetadata = (document: KnowledgeDocument) => ({
  name: document.name,
  collection: document.collection ?? null,
  tags: document.tags,
  docType: document.docType,
  sourceType: document.sourceType,
  userId: document.userId ?? null,
  contactId: document.contactId ?? null,
  projectId: document.projectId ?? null,
});

/** The subscription's documents (not deleted) and the bytes of their latest versions. */
export async function documentUsage(em: EntityManager, subscriptionId: string): Promise<{ documents: number; bytes: number }> {
  const [usage] = await em.execute<{ documents: string; bytes: string }[]>(
    `select count(*) as documents, coalesce(sum(size_bytes), 0) as bytes from knowledge_base_document where subscription_id = ? and status <> 'deleted'`,
    [subscriptionId],
  );
  return { documents: Number(usage!.documents), bytes: Number(usage!.bytes) };
}

export function metadataChanges(input: DocumentMetadata): Partial<KnowledgeDocument> {
  const changes: Partial<KnowledgeDocument> = {};
  if (input.name !== undefined) changes.name = input.name;
  if (input.description !== undefined) changes.description = input.description;
  if (input.collection !== undefined) changes.collection = input.collection;
  if (input.tags !== undefined) changes.tags = input.tags;
  if (input.userId !== undefined) changes.userId = input.userId;
  if (input.contactId !== undefined) changes.contactId = input.contactId;
  if (input.projectId !== undefined) changes.projectId = input.projectId;
  return changes;
}

export async function refreshSearchVector(em: EntityManager, subscriptionId: string, id: string): Promise<void> {
  await em.execute(
    `update knowledge_base_document set search_vector =
       setweight(to_tsvector('${TEXT_SEARCH_CONFIG}', name), 'A') || setweight(to_tsvector('${TEXT_SEARCH_CONFIG}', description), 'B')
       || setweight(to_tsvector('${TEXT_SEARCH_CONFIG}', coalesce((select string_agg(tag, ' ') from jsonb_array_elements_text(tags) as tag), '')), 'B')
     where subscription_id = ? and id = ?`,
    [subscriptionId, id],
  );
}

/** A document that is not deleted (NOT_FOUND otherwise), locked for the transaction when asked. */
export async function liveDocument(em: EntityManager, id: string, lock = false): Promise<KnowledgeDocument> {
  const document = await em.findOne(KnowledgeDocument, { id, status: { $ne: 'deleted' } }, lock ? { lockMode: LockMode.PESSIMISTIC_WRITE } : {});
  if (!document) throw notFound(`Document ${id} not found`);
  return document;
}

/**
 * The knowledge base's documents as they are: listed, read, edited and
 * soft-deleted, their versions and chunks, search, and the subscription's
 * quota, counts and filter values.
 */
export class DocumentsService {
  readonly #index: KnowledgeIndex;
  readonly #uploads: UploadService;
  readonly #extensions: Extensions;
  readonly #config: KnowledgeBaseConfig;

  constructor(deps: { knowledgeIndex: KnowledgeIndex; uploadService: UploadService; extensions: Extensions; config: KnowledgeBaseConfig }) {
    this.#index = deps.knowledgeIndex;
    this.#uploads = deps.uploadService;
    this.#extensions = deps.extensions;
    this.#config = deps.config;
  }

  async listDocuments(
    ctx: AuthenticatedContext,
    query: ListDocumentsQuery,
  ): Promise<{ data: DocumentRecord[]; totalCount: number; page: number; limit: number }> {
    const conditions: string[] = ['subscription_id = ?'];
    const params: unknown[] = [ctx.subscriptionId];
    const add = (sql: string, ...values: unknown[]) => {
      conditions.push(sql);
      params.push(...values);
    };
    if (query.status) add('status = ?', query.status);
    else add(`status <> 'deleted'`);
    if (query.userId) add('user_id = ?', query.userId);
    if (query.contactId) add('contact_id = ?', query.contactId);
    if (query.projectId) add('project_id = ?', query.projectId);
    if (query.docType) add('doc_type = ?', query.docType);
    if (query.sourceType) add('source_type = ?', query.sourceType);
    if (query.collection === null) add('collection is null');
    else if (query.collection !== undefined) add('collection = ?', query.collection);
    // Any of the tags.
    if (query.tags?.length) add(`(${query.tags.map(() => 'tags @> ?::jsonb').join(' or ')})`, ...query.tags.map((tag) => JSON.stringify([tag])));
    if (query.startTime) add('created_at >= ?', query.startTime);
    if (query.endTime) add('created_at < ?', query.endTime);
    if (query.search) {
      add(
        `(search_vector @@ websearch_to_tsquery('${TEXT_SEARCH_CONFIG}', ?) or exists (
           select 1 from knowledge_base_chunk chunk where chunk.subscription_id = knowledge_base_document.subscription_id and chunk.source = ?
             and chunk.record_id = knowledge_base_document.id and chunk.search_vector @@ websearch_to_tsquery('${TEXT_SEARCH_CONFIG}', ?)))`,
        query.search,
        SOURCE,
        query.search,
      );
    }
    const where = conditions.join(' and ');
    const [{ count }] = (await ctx.em.execute<{ count: string }[]>(`select count(*) as count from knowledge_base_document where ${where}`, params)) as [
      { count: string },
    ];
    const ids = await ctx.em.execute<{ id: string }[]>(
      `select id from knowledge_base_document where ${where} order by ${SORT_FIELDS[query.sortBy]} ${query.sortDir}, id ${query.sortDir} limit ? offset ?`,
      [...params, query.limit, (query.page - 1) * query.limit],
    );
    const documents = await ctx.em.find(KnowledgeDocument, { id: { $in: ids.map((row) => row.id) } });
    const byId = new Map(documents.map((document) => [document.id, document]));
    return { data: ids.map((row) => toRecord(byId.get(row.id)!)), totalCount: Number(count), page: query.page, limit: query.limit };
  }

  /** The document, with the Markdown its latest ingested version was read as. */
  async getDocument(ctx: AuthenticatedContext, id: string): Promise<DocumentRecord & { content: string | null }> {
    const document = await this.#find(ctx.em, id);
    const [latest] = await ctx.em.execute<{ markdown: string }[]>(
      'select markdown from knowledge_base_document_version where subscription_id = ? and document_id = ? and markdown is not null order by version desc limit 1',
      [ctx.subscriptionId, id],
    );
    return { ...toRecord(document), content: latest?.markdown ?? null };
  }

  async updateDocument(ctx: AuthenticatedContext, id: string, updates: DocumentMetadata): Promise<DocumentRecord> {
    return ctx.em.fork().transactional(async (em) => {
      const document = await liveDocument(em, id, true);
      Object.assign(document, metadataChanges(updates), { updatedAt: new Date() });
      await em.flush();
      await refreshSearchVector(em, ctx.subscriptionId, id);
      await this.#index.setMetadata(ctx, em, SOURCE, id, document.collection ?? null, searchMetadata(document));
      return toRecord(document);
    });
  }

  /** Soft delete: the document stays (status deleted); its chunks leave search at once and are removed by a job. */
  async deleteDocument(ctx: AuthenticatedContext, id: string): Promise<DocumentRecord> {
    return ctx.em.fork().transactional(async (em) => {
      const document = await liveDocument(em, id, true);
      const now = new Date();
      Object.assign(document, { status: 'deleted', deletedAt: now, updatedAt: now, chunkCount: 0 });
      await em.nativeUpdate(Ingestion, { documentId: id, state: 'queued' }, { state: 'cancelled', finishedAt: now });
      await em.flush();
      await this.#index.withdraw(ctx, em, SOURCE, [id]);
      return toRecord(document);
    });
  }

  async getDocumentVersions(ctx: AuthenticatedContext, id: string) {
    const document = await this.#find(ctx.em, id);
    const versions = await ctx.em.find(DocumentVersion, { documentId: id }, { orderBy: { version: 'desc' } });
    return versions.map((version) => ({ ...VERSION.toRecord(version), current: version.version === document.version }));
  }

  async reindexDocument(ctx: AuthenticatedContext, id: string): Promise<{ success: true; chunkCount: number }> {
    return ctx.em.fork().transactional(async (em) => {
      const document = await liveDocument(em, id);
      if (document.status !== 'ready') throw conflict(`Document ${id} is ${document.status}; only a ready document can be reindexed`);
      await this.#index.reembed(ctx, em, SOURCE, id);
      return { success: true as const, chunkCount: document.chunkCount };
    });
  }

  async getChunks(ctx: AuthenticatedContext, id: string): Promise<IndexedChunk[]> {
    await liveDocument(ctx.em, id);
    return this.#index.chunks(ctx, SOURCE, id);
  }

  async updateChunk(ctx: AuthenticatedContext, id: string, chunkId: string, text: string): Promise<IndexedChunk> {
    await liveDocument(ctx.em, id);
    const chunk = await this.#index.updateChunk(ctx, SOURCE, id, chunkId, text);
    if (!chunk) throw notFound(`Chunk ${chunkId} not found in document ${id}`);
    return chunk;
  }

  async deleteChunk(ctx: AuthenticatedContext, id: string, chunkId: string): Promise<{ success: true; chunkCount: number }> {
    return ctx.em.fork().transactional(async (em) => {
      const document = await liveDocument(em, id, true);
      const scoped = { ...ctx, em } as AuthenticatedContext;
      if (!(await this.#index.deleteChunk(scoped, SOURCE, id, chunkId))) throw notFound(`Chunk ${chunkId} not found in document ${id}`);
      document.chunkCount = Math.max(0, document.chunkCount - 1);
      document.updatedAt = new Date();
      await em.flush();
      return { success: true as const, chunkCount: document.chunkCount };
    });
  }

  async search(ctx: AuthenticatedContext, query: { queryText: string; topK: number; filter?: unknown; collection?: string | null; mode: SearchMode }) {
    const hits = await this.#index.search(ctx, { source: SOURCE, ...query });
    return hits.map(({ recordId, metadata, ...hit }) => ({ ...hit, documentId: recordId, name: String(metadata.name), metadata }));
  }

  /** Documents (not deleted) and bytes of their latest versions, against the subscription's limits. */
  async getQuota(ctx: AuthenticatedContext) {
    const used = await documentUsage(ctx.em, ctx.subscriptionId);
    return {
      documents: { used: used.documents, limit: this.#config.KB_MAX_DOCUMENTS },
      storageBytes: { used: used.bytes, limit: this.#config.KB_MAX_STORAGE_BYTES },
      maxFileBytes: this.#uploads.limitsOf(FILE_PURPOSE).maxBytes,
    };
  }

  /** Counts by status, chunks embedded and waiting, ingestions by state, and the embedding model (with a switch's progress). */
  async getStats(ctx: AuthenticatedContext) {
    const statuses = await ctx.em.execute<{ status: DocumentStatus; count: string; bytes: string }[]>(
      'select status, count(*) as count, coalesce(sum(size_bytes), 0) as bytes from knowledge_base_document where subscription_id = ? group by status',
      [ctx.subscriptionId],
    );
    const states = await ctx.em.execute<{ state: IngestionState; count: string }[]>(
      'select state, count(*) as count from knowledge_base_ingestion where subscription_id = ? group by state',
      [ctx.subscriptionId],
    );
    const byStatus = Object.fromEntries(STATUSES.map((status) => [status, Number(statuses.find((row) => row.status === status)?.count ?? 0)]));
    const chunks = await this.#index.counts(ctx, SOURCE);
    return {
      documents: { total: Object.values(byStatus).reduce((sum, count) => sum + count, 0) - byStatus.deleted!, byStatus },
      storageBytes: statuses.filter((row) => row.status !== 'deleted').reduce((sum, row) => sum + Number(row.bytes), 0),
      chunks: { total: chunks.total, embedded: chunks.embedded, pending: chunks.total - chunks.embedded },
      ingestions: Object.fromEntries(INGESTION_STATES.map((state) => [state, Number(states.find((row) => row.state === state)?.count ?? 0)])),
      embedding: await this.#index.embeddingStatus(ctx),
    };
  }

  /** The values the list filters take: doc types (one per parser), source types, statuses, sort fields, and the collections and tags in use. */
  async getOptions(ctx: AuthenticatedContext) {
    const collections = await ctx.em.execute<{ value: string }[]>(
      `select distinct collection as value from knowledge_base_document where subscription_id = ? and status <> 'deleted' and collection is not null order by 1 limit 1000`,
      [ctx.subscriptionId],
    );
    const tags = await ctx.em.execute<{ value: string }[]>(
      `select distinct tag as value from knowledge_base_document, jsonb_array_elements_text(tags) as tag where subscription_id = ? and status <> 'deleted' order by 1 limit 1000`,
      [ctx.subscriptionId],
    );
    return {
      docTypes: loadedParsers(this.#extensions).map((parser) => parser.name),
      sourceTypes: [...SOURCE_TYPES],
      statuses: [...STATUSES],
      sortBy: Object.keys(SORT_FIELDS),
      fileTypes: [...this.#uploads.limitsOf(FILE_PURPOSE).types],
      collections: collections.map((row) => row.value),
      tags: tags.map((row) => row.value),
    };
  }

  async #find(em: EntityManager, id: string): Promise<KnowledgeDocument> {
    const document = await em.findOne(KnowledgeDocument, { id });
    if (!document) throw notFound(`Document ${id} not found`);
    return document;
  }
}
