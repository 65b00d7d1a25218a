import { LockMode } from '@mikro-orm/core';
import { randomUUID } from 'node:crypto';
import {
  badRequest,
  conflict,
  notFound,
  OutboundRefusedError,
  RpcError,
  validationError,
  type AuthenticatedContext,
  type EntityManager,
  type Extensions,
  type Jobs,
  type JobRun,
  type Outbound,
  type PluginServices,
  type PurposeLimits,
  type RequestContext,
  type UploadService,
  type WorkerPool,
} from 'rpc-service/plugin';
import type { KnowledgeBaseConfig } from './config.ts';
import { DocumentVersion } from './document-version.entity.ts';
import { KnowledgeDocument, SOURCE_TYPES, STATUSES, type DocumentStatus, type SourceType } from './document.entity.ts';
import { Ingestion, INGESTION_STATES, type IngestionState } from './ingestion.entity.ts';
import { TEXT_SEARCH_CONFIG, type IndexedChunk, type KnowledgeIndex } from './knowledge-index.ts';
import type { ParsedText, ParseTask } from './parse.worker.ts';
import { builtInParsers, type ParserContribution } from './parsers.ts';

/** The knowledge base's records in the search index. */
export const SOURCE = 'knowledge-base';
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

export interface TextIngest extends DocumentMetadata {
  name: string;
  content: string;
  format: 'text' | 'markdown' | 'html';
  /** Ingest as a new version of this document. */
  documentId?: string;
}

export interface FileIngest extends DocumentMetadata {
  uploadKey: string;
  documentId?: string;
}

export interface UrlIngest extends DocumentMetadata {
  url: string;
  documentId?: string;
}

/** What a document is given when it is ingested: its metadata and name, and documentId for a new version of it. */
type IngestInput = DocumentMetadata & { name: string; documentId?: string };
/** Where an ingestion reads from: the text, the file or the URL, and its size. */
interface IngestContent {
  docType: string;
  sourceType: SourceType;
  source?: string;
  fileId?: string;
  fileName?: string;
  sourceUrl?: string;
  sizeBytes: number;
}

/** What an ingestion reads: the bytes, the parser they go to, and the name of the file they came from. */
interface Content {
  bytes: Buffer;
  parser: ParserContribution;
  fileName: string | null;
}

export interface DocumentRecord {
  _id: string;
  name: string;
  description: string;
  collection: string | null;
  tags: string[];
  status: DocumentStatus;
  error: string | null;
  docType: string;
  sourceType: SourceType;
  userId: string | null;
  contactId: string | null;
  projectId: string | null;
  version: number;
  chunkCount: number;
  sizeBytes: number;
  createdBy: string;
  createdAt: string;
  updatedAt: string;
  deletedAt: string | null;
}

export interface IngestionRecord {
  jobId: string;
  documentId: string;
  version: number;
  state: IngestionState;
  error: string | null;
  createdBy: string;
  createdAt: string;
  startedAt: string | null;
  finishedAt: string | null;
}

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

export const SORT_FIELDS = { createdAt: 'created_at', updatedAt: 'updated_at', name: 'lower(name)', status: 'status', sizeBytes: 'size_bytes', chunkCount: 'chunk_count' } as const;
export type SortField = keyof typeof SORT_FIELDS;

const toRecord = (document: KnowledgeDocument): DocumentRecord => ({
  _id: document.id,
  name: document.name,
  description: document.description,
  collection: document.collection ?? null,
  tags: document.tags,
  status: document.status,
  error: document.error ?? null,
  docType: document.docType,
  sourceType: document.sourceType,
  userId: document.userId ?? null,
  contactId: document.contactId ?? null,
  projectId: document.projectId ?? null,
  version: document.version,
  chunkCount: document.chunkCount,
  sizeBytes: Number(document.sizeBytes),
  createdBy: document.createdBy,
  createdAt: document.createdAt.toISOString(),
  updatedAt: document.updatedAt.toISOString(),
  deletedAt: document.deletedAt?.toISOString() ?? null,
});

const toIngestion = (ingestion: Ingestion): IngestionRecord => ({
  jobId: ingestion.id,
  documentId: ingestion.documentId,
  version: ingestion.version,
  state: ingestion.state,
  error: ingestion.error ?? null,
  createdBy: ingestion.createdBy,
  createdAt: ingestion.createdAt.toISOString(),
  startedAt: ingestion.startedAt?.toISOString() ?? null,
  finishedAt: ingestion.finishedAt?.toISOString() ?? null,
});

/** What the index keeps with each chunk, for search filters. */
const searchMetadata = (document: KnowledgeDocument) => ({
  name: document.name,
  collection: document.collection ?? null,
  tags: document.tags,
  docType: document.docType,
  sourceType: document.sourceType,
  userId: document.userId ?? null,
  contactId: document.contactId ?? null,
  projectId: document.projectId ?? null,
});

/** Failures worth another attempt: the embedding provider, not the document. */
const retryable = (error: unknown) => error instanceof RpcError && error.code === 'UPSTREAM_ERROR';

/**
 * The knowledge base: documents ingested from text or uploaded files,
 * parsed to Markdown and chunked in the worker pool, embedded, and kept
 * in the search index; versions, soft deletes, chunk edits.
 */
export class KnowledgeBaseService {
  readonly #index: KnowledgeIndex;
  readonly #uploads: UploadService;
  readonly #pool: WorkerPool;
  readonly #jobs: Jobs;
  readonly #outbound: Outbound;
  readonly #users: PluginServices['userService'];
  readonly #extensions: Extensions;
  readonly #config: KnowledgeBaseConfig;
  #parserList?: ParserContribution[];

  constructor(deps: {
    knowledgeIndex: KnowledgeIndex;
    uploadService: UploadService;
    pool: WorkerPool;
    jobs: Jobs;
    outbound: Outbound;
    userService: PluginServices['userService'];
    extensions: Extensions;
    config: KnowledgeBaseConfig;
  }) {
    this.#index = deps.knowledgeIndex;
    this.#uploads = deps.uploadService;
    this.#pool = deps.pool;
    this.#jobs = deps.jobs;
    this.#outbound = deps.outbound;
    this.#users = deps.userService;
    this.#extensions = deps.extensions;
    this.#config = deps.config;
  }

  /** Built-in parsers first; a contributed parser adds types, it does not replace a built-in one. */
  get parsers(): ParserContribution[] {
    this.#parserList ??= [...builtInParsers, ...this.#extensions.get('knowledge-base.parsers').map((contribution) => contribution.value)];
    return this.#parserList;
  }

  uploadLimits(): PurposeLimits {
    return { maxBytes: this.#config.KB_MAX_FILE_BYTES, maxFiles: 20, types: [...new Set(this.parsers.flatMap((parser) => parser.types)), 'application/octet-stream'] };
  }

  async ingestText(ctx: AuthenticatedContext, input: TextIngest): Promise<{ document: DocumentRecord; jobId: string }> {
    await this.#checkUser(ctx, input);
    const bytes = Buffer.byteLength(input.content);
    return this.#ingest(ctx, input, { docType: input.format, sourceType: 'text', source: input.content, sizeBytes: bytes });
  }

  /**
   * A web page or file to fetch and ingest: the job fetches it through the
   * outbound guard, and what it answers picks the parser (its content type,
   * else the URL's ending). Its size counts once it has been fetched.
   */
  async ingestUrl(ctx: AuthenticatedContext, input: UrlIngest): Promise<{ document: DocumentRecord; jobId: string }> {
    await this.#checkUser(ctx, input);
    let url: URL;
    try {
      url = this.#outbound.check(input.url);
    } catch (error) {
      throw validationError([{ path: 'url', message: (error as Error).message }]);
    }
    const docType = this.#parserFor('', url.pathname)?.name ?? 'html';
    return this.#ingest(ctx, { ...input, name: input.name ?? url.href }, { docType, sourceType: 'url', sourceUrl: url.href, sizeBytes: 0 });
  }

  /**
   * One document per file uploaded with the key (one file only when documentId names the document to re-ingest).
   * The documents are written in the transaction that uses up the key: a refusal (no such document, the quota,
   * a file no parser reads) changes nothing, and the key stays usable.
   */
  async ingestFiles(ctx: AuthenticatedContext, input: FileIngest): Promise<{ documents: DocumentRecord[]; jobIds: string[] }> {
    await this.#checkUser(ctx, input);
    const results = await this.#uploads.consume(ctx, input.uploadKey, FILE_PURPOSE, async (files, em) => {
      if (files.length === 0) throw badRequest('No file has been uploaded with this upload key');
      if (input.documentId && files.length !== 1) throw badRequest('A new version of a document takes exactly one file');
      const written = [];
      for (const file of files) {
        const parser = this.#parserFor(file.mimeType, file.fileName);
        if (!parser) throw validationError([{ path: 'uploadKey', message: `${file.fileName}: no parser reads ${file.mimeType} files` }]);
        written.push(
          await this.#write(
            ctx,
            em,
            { ...input, name: input.name ?? file.fileName },
            { docType: parser.name, sourceType: 'file', fileId: file.fileId, fileName: file.fileName, sizeBytes: file.size },
          ),
        );
      }
      return written;
    });
    return { documents: results.map((result) => result.document), jobIds: results.map((result) => result.jobId) };
  }

  /** A document belongs to a user of the caller's subscription, or to nobody. */
  async #checkUser(ctx: AuthenticatedContext, input: DocumentMetadata): Promise<void> {
    if (!input.userId || input.userId === ctx.userId) return;
    const holder = await this.#users.credentialHolder(input.userId);
    if (holder?.subscriptionId !== ctx.subscriptionId) throw validationError([{ path: 'userId', message: `No user ${input.userId} in this subscription` }]);
  }

  #ingest(ctx: AuthenticatedContext, input: IngestInput, content: IngestContent): Promise<{ document: DocumentRecord; jobId: string }> {
    return ctx.em.fork().transactional((em) => this.#write(ctx, em, input, content));
  }

  /** The document (new, or a new version of documentId), its version and its ingestion job, in the caller's transaction. */
  async #write(ctx: AuthenticatedContext, em: EntityManager, input: IngestInput, content: IngestContent): Promise<{ document: DocumentRecord; jobId: string }> {
    const now = new Date();
    let document: KnowledgeDocument;
    const replaced = input.documentId ? await this.#live(em, input.documentId, true) : null;
    await this.#checkQuota(em, ctx, replaced ? 0 : 1, content.sizeBytes - Number(replaced?.sizeBytes ?? 0));
    if (replaced) {
      document = replaced;
      Object.assign(document, this.#metadataChanges(input), {
        docType: content.docType,
        sourceType: content.sourceType,
        version: document.version + 1,
        status: 'pending',
        error: null,
        sizeBytes: content.sizeBytes,
        updatedAt: now,
      });
    } else {
      document = em.create(KnowledgeDocument, {
        id: randomUUID(),
        subscriptionId: ctx.subscriptionId,
        name: input.name,
        description: input.description ?? '',
        collection: input.collection ?? null,
        tags: input.tags ?? [],
        docType: content.docType,
        sourceType: content.sourceType,
        userId: input.userId === undefined ? ctx.userId : input.userId,
        contactId: input.contactId ?? null,
        projectId: input.projectId === undefined ? ctx.projectId : input.projectId,
        status: 'pending',
        error: null,
        version: 1,
        chunkCount: 0,
        sizeBytes: content.sizeBytes,
        createdBy: ctx.userId,
        createdAt: now,
        updatedAt: now,
        searchVector: null,
        deletedAt: null,
      });
    }
    em.create(DocumentVersion, {
      id: randomUUID(),
      subscriptionId: ctx.subscriptionId,
      documentId: document.id,
      version: document.version,
      docType: content.docType,
      source: content.source ?? null,
      fileId: content.fileId ?? null,
      fileName: content.fileName ?? null,
      sourceUrl: content.sourceUrl ?? null,
      sizeBytes: content.sizeBytes,
      markdown: null,
      createdBy: ctx.userId,
      createdAt: now,
    });
    await em.flush();
    await this.#refreshSearchVector(em, document.id);
    const ingestion = await this.#queueIngestion(ctx, em, document);
    return { document: toRecord(document), jobId: ingestion.id };
  }

  /**
   * The `ingest` job: reads the version's text or file, parses it to
   * Markdown and chunks it in the worker pool, writes it to the index and
   * embeds it; the document is ready when that is done, failed (with the
   * reason) when the content cannot be read. A failure of the embedding
   * provider is retried by the job service.
   */
  async runIngestion(ctx: RequestContext, ingestionId: string, job: JobRun): Promise<{ state: IngestionState; chunks?: number }> {
    const auth = ctx as AuthenticatedContext;
    const ingestion = await ctx.em.findOne(Ingestion, { id: ingestionId });
    if (!ingestion || ingestion.state === 'cancelled' || ingestion.state === 'done') return { state: ingestion?.state ?? 'cancelled' };
    await this.#setIngestion(ctx, ingestionId, { state: 'running', startedAt: new Date(), error: null }, 'processing');
    try {
      const version = await ctx.em.findOneOrFail(DocumentVersion, { documentId: ingestion.documentId, version: ingestion.version });
      const content = await this.#content(auth, version);
      const task: ParseTask = { format: content.parser.name, bytes: new Uint8Array(content.bytes), fileName: content.fileName };
      const parsed = await this.#pool.run<ParsedText>(content.parser.worker, task).catch((error: Error) => {
        throw new IngestError(error.message.replace(/^Worker task "[^"]*" failed: /, ''));
      });
      if (!parsed.markdown.trim()) throw new IngestError('The document holds no text');

      const document = await ctx.em.findOneOrFail(KnowledgeDocument, { id: ingestion.documentId });
      const [prepared] = await this.#index.prepare([
        { source: SOURCE, recordId: document.id, collection: document.collection ?? null, title: document.name, markdown: parsed.markdown, metadata: searchMetadata({ ...document, docType: content.parser.name }) },
      ]);
      const written = await ctx.em.fork().transactional(async (em) => {
        // Still the version to ingest, still wanted: a cancel, a delete or a newer version wins.
        const current = await em.findOne(KnowledgeDocument, { id: document.id }, { lockMode: LockMode.PESSIMISTIC_WRITE });
        const still = await em.findOne(Ingestion, { id: ingestionId });
        if (!current || current.status === 'deleted' || current.version !== ingestion.version || still?.state !== 'running') return null;
        if (version.sourceUrl) {
          // What was fetched is known only now: its size counts against the quota, its parser names its type.
          await this.#checkQuota(em, auth, 0, content.bytes.length - Number(current.sizeBytes));
          const fetched = { docType: content.parser.name, sizeBytes: content.bytes.length };
          await em.nativeUpdate(DocumentVersion, { id: version.id }, fetched);
          await em.nativeUpdate(KnowledgeDocument, { id: document.id }, fetched);
        }
        const result = await this.#index.write(auth, em, prepared!, { queueEmbedding: false });
        await em.nativeUpdate(DocumentVersion, { id: version.id }, { markdown: parsed.markdown });
        await em.nativeUpdate(KnowledgeDocument, { id: document.id }, { chunkCount: result.chunks });
        return result;
      });
      if (!written) {
        await this.#setIngestion(ctx, ingestionId, { state: 'cancelled', finishedAt: new Date() });
        return { state: 'cancelled' };
      }
      await this.#index.embedPending(ctx, { subscriptionId: auth.subscriptionId, source: SOURCE, recordIds: [ingestion.documentId] });
      await this.#setIngestion(ctx, ingestionId, { state: 'done', finishedAt: new Date() }, 'ready');
      return { state: 'done', chunks: written.chunks };
    } catch (error) {
      const reason = error instanceof IngestError || error instanceof RpcError ? error.message : 'The document could not be processed';
      if (!(error instanceof IngestError || error instanceof RpcError)) ctx.log.error({ err: error, ingestionId }, 'ingestion failed');
      const last = job.attempt > 3;
      if (retryable(error) && !last) {
        await this.#setIngestion(ctx, ingestionId, { state: 'queued', error: reason });
        throw error;
      }
      await this.#setIngestion(ctx, ingestionId, { state: 'failed', error: reason, finishedAt: new Date() }, 'failed', reason);
      return { state: 'failed' };
    }
  }

  /** Documents (not deleted) and bytes of their latest versions, against the subscription's limits. */
  async getQuota(ctx: AuthenticatedContext) {
    const used = await this.#usage(ctx.em, ctx.subscriptionId);
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
      docTypes: this.parsers.map((parser) => parser.name),
      sourceTypes: [...SOURCE_TYPES],
      statuses: [...STATUSES],
      sortBy: Object.keys(SORT_FIELDS),
      fileTypes: this.uploadLimits().types,
      collections: collections.map((row) => row.value),
      tags: tags.map((row) => row.value),
    };
  }

  /** Ingestion runs, newest first. */
  async listJobs(ctx: AuthenticatedContext, query: { documentId?: string; state?: IngestionState; page: number; limit: number }) {
    const where = { ...(query.documentId ? { documentId: query.documentId } : {}), ...(query.state ? { state: query.state } : {}) };
    const [runs, totalCount] = await ctx.em.findAndCount(Ingestion, where, {
      orderBy: { createdAt: 'desc', id: 'desc' },
      limit: query.limit,
      offset: (query.page - 1) * query.limit,
    });
    return { data: runs.map(toIngestion), totalCount, page: query.page, limit: query.limit };
  }

  async getJob(ctx: AuthenticatedContext, jobId: string): Promise<IngestionRecord> {
    return toIngestion(await this.#ingestion(ctx.em, jobId));
  }

  /** Runs a failed or cancelled ingestion again, if its version is still the document's latest. */
  async retryJob(ctx: AuthenticatedContext, jobId: string): Promise<IngestionRecord> {
    return ctx.em.fork().transactional(async (em) => {
      const previous = await this.#ingestion(em, jobId);
      if (previous.state !== 'failed' && previous.state !== 'cancelled') throw conflict(`Job ${jobId} is ${previous.state}; only a failed or cancelled job can be retried`);
      const document = await this.#live(em, previous.documentId, true);
      if (document.version !== previous.version) throw conflict(`Job ${jobId} ingested version ${previous.version}; the document is at version ${document.version}`);
      Object.assign(document, { status: 'pending', error: null, updatedAt: new Date() });
      return toIngestion(await this.#queueIngestion(ctx, em, document));
    });
  }

  /**
   * Stops an ingestion that has not finished: a queued one never runs, a
   * running one stops before it writes to the index. The document keeps what
   * the index holds: ready with an earlier version's chunks, else failed.
   */
  async cancelJob(ctx: AuthenticatedContext, jobId: string): Promise<IngestionRecord> {
    const ingestion = await ctx.em.fork().transactional(async (em) => {
      const found = await this.#ingestion(em, jobId, true);
      if (found.state !== 'queued' && found.state !== 'running') throw conflict(`Job ${jobId} is ${found.state}; only a queued or running job can be cancelled`);
      Object.assign(found, { state: 'cancelled', finishedAt: new Date() });
      const document = await em.findOne(KnowledgeDocument, { id: found.documentId, version: found.version, status: { $ne: 'deleted' } });
      if (document) Object.assign(document, document.chunkCount > 0 ? { status: 'ready', error: null } : { status: 'failed', error: 'Ingestion cancelled' }, { updatedAt: new Date() });
      await em.flush();
      return found;
    });
    if (ingestion.jobId) await this.#jobs.cancel('ingest', ingestion.jobId);
    return toIngestion(ingestion);
  }

  async listDocuments(ctx: AuthenticatedContext, query: ListDocumentsQuery): Promise<{ data: DocumentRecord[]; totalCount: number; page: number; limit: number }> {
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
    if (query.collection !== undefined) query.collection === null ? add('collection is null') : add('collection = ?', query.collection);
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
    const [{ count }] = (await ctx.em.execute<{ count: string }[]>(`select count(*) as count from knowledge_base_document where ${where}`, params)) as [{ count: string }];
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
      const document = await this.#live(em, id, true);
      Object.assign(document, this.#metadataChanges(updates), { updatedAt: new Date() });
      await em.flush();
      await this.#refreshSearchVector(em, id);
      await this.#index.setMetadata(ctx, em, SOURCE, id, document.collection ?? null, searchMetadata(document));
      return toRecord(document);
    });
  }

  /** Soft delete: the document stays (status deleted); its chunks leave search at once and are removed by a job. */
  async deleteDocument(ctx: AuthenticatedContext, id: string): Promise<DocumentRecord> {
    return ctx.em.fork().transactional(async (em) => {
      const document = await this.#live(em, id, true);
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
    return versions.map((version) => ({
      version: version.version,
      docType: version.docType,
      fileId: version.fileId ?? null,
      fileName: version.fileName ?? null,
      sourceUrl: version.sourceUrl ?? null,
      sizeBytes: Number(version.sizeBytes),
      current: version.version === document.version,
      createdBy: version.createdBy,
      createdAt: version.createdAt.toISOString(),
    }));
  }

  async reindexDocument(ctx: AuthenticatedContext, id: string): Promise<{ success: true; chunkCount: number }> {
    return ctx.em.fork().transactional(async (em) => {
      const document = await this.#live(em, id);
      if (document.status !== 'ready') throw conflict(`Document ${id} is ${document.status}; only a ready document can be reindexed`);
      await this.#index.reembed(ctx, em, SOURCE, id);
      return { success: true as const, chunkCount: document.chunkCount };
    });
  }

  async getChunks(ctx: AuthenticatedContext, id: string): Promise<IndexedChunk[]> {
    await this.#live(ctx.em, id);
    return this.#index.chunks(ctx, SOURCE, id);
  }

  async updateChunk(ctx: AuthenticatedContext, id: string, chunkId: string, text: string): Promise<IndexedChunk> {
    await this.#live(ctx.em, id);
    const chunk = await this.#index.updateChunk(ctx, SOURCE, id, chunkId, text);
    if (!chunk) throw notFound(`Chunk ${chunkId} not found in document ${id}`);
    return chunk;
  }

  async deleteChunk(ctx: AuthenticatedContext, id: string, chunkId: string): Promise<{ success: true; chunkCount: number }> {
    return ctx.em.fork().transactional(async (em) => {
      const document = await this.#live(em, id, true);
      const scoped = { ...ctx, em } as AuthenticatedContext;
      if (!(await this.#index.deleteChunk(scoped, SOURCE, id, chunkId))) throw notFound(`Chunk ${chunkId} not found in document ${id}`);
      document.chunkCount = Math.max(0, document.chunkCount - 1);
      document.updatedAt = new Date();
      await em.flush();
      return { success: true as const, chunkCount: document.chunkCount };
    });
  }

  async search(ctx: AuthenticatedContext, query: { queryText: string; topK: number; filter?: unknown; collection?: string | null; mode: 'hybrid' | 'semantic' }) {
    const hits = await this.#index.search(ctx, { source: SOURCE, ...query });
    return hits.map(({ recordId, metadata, ...hit }) => ({ ...hit, documentId: recordId, name: String(metadata.name), metadata }));
  }

  /** A run of ingestion for the document's latest version, and its job, queued in `em`'s transaction. */
  async #queueIngestion(ctx: AuthenticatedContext, em: EntityManager, document: KnowledgeDocument): Promise<Ingestion> {
    const ingestion = em.create(Ingestion, {
      id: randomUUID(),
      subscriptionId: ctx.subscriptionId,
      documentId: document.id,
      version: document.version,
      state: 'queued',
      error: null,
      jobId: null,
      createdBy: ctx.userId,
      createdAt: new Date(),
      startedAt: null,
      finishedAt: null,
    });
    await em.flush();
    ingestion.jobId = await this.#jobs.enqueue('ingest', { ingestionId: ingestion.id }, { ctx, em });
    await em.flush();
    return ingestion;
  }

  async #ingestion(em: EntityManager, id: string, lock = false): Promise<Ingestion> {
    const ingestion = await em.findOne(Ingestion, { id }, lock ? { lockMode: LockMode.PESSIMISTIC_WRITE } : {});
    if (!ingestion) throw notFound(`Job ${id} not found`);
    return ingestion;
  }

  async #usage(em: EntityManager, subscriptionId: string): Promise<{ documents: number; bytes: number }> {
    const [usage] = await em.execute<{ documents: string; bytes: string }[]>(
      `select count(*) as documents, coalesce(sum(size_bytes), 0) as bytes from knowledge_base_document where subscription_id = ? and status <> 'deleted'`,
      [subscriptionId],
    );
    return { documents: Number(usage!.documents), bytes: Number(usage!.bytes) };
  }

  /** Refuses an ingestion that would take the subscription past its limits (checked in the ingesting transaction). */
  async #checkQuota(em: EntityManager, ctx: AuthenticatedContext, moreDocuments: number, moreBytes: number): Promise<void> {
    const used = await this.#usage(em, ctx.subscriptionId);
    if (used.documents + moreDocuments > this.#config.KB_MAX_DOCUMENTS) {
      throw new RpcError('QUOTA_EXCEEDED', `The knowledge base holds ${used.documents} documents, its limit is ${this.#config.KB_MAX_DOCUMENTS}`);
    }
    if (used.bytes + moreBytes > this.#config.KB_MAX_STORAGE_BYTES) {
      throw new RpcError('QUOTA_EXCEEDED', `The knowledge base would hold ${used.bytes + moreBytes} bytes, its limit is ${this.#config.KB_MAX_STORAGE_BYTES}`);
    }
  }

  /** The parser of a content type, else of a file name's ending. */
  #parserFor(contentType: string, fileName: string): ParserContribution | undefined {
    const type = contentType.split(';')[0]!.trim().toLowerCase();
    const ending = /\.[A-Za-z0-9]+$/.exec(fileName)?.[0]?.toLowerCase();
    return this.parsers.find((parser) => parser.types.includes(type)) ?? (ending ? this.parsers.find((parser) => parser.extensions.includes(ending)) : undefined);
  }

  /** The text, stored file or fetched page of a version, and its parser. */
  async #content(ctx: AuthenticatedContext, version: DocumentVersion): Promise<Content> {
    if (version.sourceUrl) {
      const { bytes, contentType } = await this.#fetch(version.sourceUrl);
      const { pathname } = new URL(version.sourceUrl);
      const parser = this.#parserFor(contentType, pathname);
      if (!parser) throw new IngestError(`No parser reads ${contentType || 'content without a type'} (${version.sourceUrl})`);
      return { bytes, parser, fileName: decodeURIComponent(pathname.split('/').at(-1) ?? '') || null };
    }
    const parser = this.parsers.find((candidate) => candidate.name === version.docType);
    if (!parser) throw new IngestError(`No parser named ${version.docType} is loaded`);
    const bytes = version.fileId ? await this.#fileBytes(ctx, version.fileId) : Buffer.from(await this.#versionText(ctx.em, version.id, 'source'), 'utf8');
    return { bytes, parser, fileName: version.fileName ?? null };
  }

  /**
   * GETs a URL through the outbound guard, up to the file size limit and
   * KB_FETCH_TIMEOUT_MS. An answer that will not change by asking again
   * (refused, 4xx, too large) fails the ingestion; a lost connection,
   * a timeout, 429 or 5xx is retried by the job service.
   */
  async #fetch(url: string): Promise<{ bytes: Buffer; contentType: string }> {
    const maxBytes = this.#uploads.limitsOf(FILE_PURPOSE).maxBytes;
    const unavailable = (reason: string) => new RpcError('UPSTREAM_ERROR', `Fetching ${url} failed: ${reason}`);
    try {
      const response = await this.#outbound.fetch(url, {
        headers: { accept: 'text/html, text/markdown, text/plain, application/pdf, */*;q=0.5' },
        signal: AbortSignal.timeout(this.#config.KB_FETCH_TIMEOUT_MS),
      });
      if (!response.ok) {
        await response.body?.cancel();
        const answer = `${url} answered ${response.status} ${response.statusText}`.trim();
        if (response.status === 429 || response.status >= 500) throw unavailable(answer);
        throw new IngestError(answer);
      }
      if (Number(response.headers.get('content-length') ?? 0) > maxBytes) {
        await response.body?.cancel();
        throw new IngestError(`${url} is larger than ${maxBytes} bytes`);
      }
      const parts: Buffer[] = [];
      let size = 0;
      for await (const part of response.body ?? []) {
        size += part.length;
        // Leaving the loop cancels the rest of the body.
        if (size > maxBytes) throw new IngestError(`${url} is larger than ${maxBytes} bytes`);
        parts.push(Buffer.from(part));
      }
      return { bytes: Buffer.concat(parts), contentType: response.headers.get('content-type') ?? '' };
    } catch (error) {
      if (error instanceof IngestError || error instanceof RpcError) throw error;
      if (error instanceof OutboundRefusedError) throw new IngestError(`${url} may not be fetched: ${error.message}`);
      const code = (error as { cause?: { code?: unknown } }).cause?.code;
      const reason =
        error instanceof Error && error.name === 'TimeoutError'
          ? `no answer within ${this.#config.KB_FETCH_TIMEOUT_MS} ms`
          : `the connection failed${typeof code === 'string' ? ` (${code})` : ''}`;
      throw unavailable(reason);
    }
  }

  async #fileBytes(ctx: AuthenticatedContext, fileId: string): Promise<Buffer> {
    const { content } = await this.#uploads.open(ctx, fileId).catch(() => {
      throw new IngestError('The uploaded file is no longer there');
    });
    const parts: Buffer[] = [];
    for await (const part of content) parts.push(part as Buffer);
    return Buffer.concat(parts);
  }

  /** The large text columns of a version are lazy: read one when needed. */
  async #versionText(em: EntityManager, versionId: string, column: 'source' | 'markdown'): Promise<string> {
    const [row] = await em.execute<{ text: string | null }[]>(`select ${column} as text from knowledge_base_document_version where id = ?`, [versionId]);
    return row?.text ?? '';
  }

  #metadataChanges(input: DocumentMetadata): Partial<KnowledgeDocument> {
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

  async #refreshSearchVector(em: EntityManager, id: string): Promise<void> {
    await em.execute(
      `update knowledge_base_document set search_vector =
         setweight(to_tsvector('${TEXT_SEARCH_CONFIG}', name), 'A') || setweight(to_tsvector('${TEXT_SEARCH_CONFIG}', description), 'B')
         || setweight(to_tsvector('${TEXT_SEARCH_CONFIG}', coalesce((select string_agg(tag, ' ') from jsonb_array_elements_text(tags) as tag), '')), 'B')
       where id = ?`,
      [id],
    );
  }

  async #setIngestion(
    ctx: RequestContext,
    ingestionId: string,
    changes: Partial<Ingestion>,
    status?: DocumentStatus,
    error: string | null = null,
  ): Promise<void> {
    await ctx.em.fork().transactional(async (em) => {
      const ingestion = await em.findOneOrFail(Ingestion, { id: ingestionId });
      Object.assign(ingestion, changes);
      // The document shows the state of its latest version's ingestion, unless it was deleted.
      if (status) await em.nativeUpdate(KnowledgeDocument, { id: ingestion.documentId, version: ingestion.version, status: { $ne: 'deleted' } }, { status, error, updatedAt: new Date() });
      await em.flush();
    });
  }

  async #find(em: EntityManager, id: string): Promise<KnowledgeDocument> {
    const document = await em.findOne(KnowledgeDocument, { id });
    if (!document) throw notFound(`Document ${id} not found`);
    return document;
  }

  /** A document that is not deleted (NOT_FOUND otherwise), locked for the transaction when asked. */
  async #live(em: EntityManager, id: string, lock = false): Promise<KnowledgeDocument> {
    const document = await em.findOne(KnowledgeDocument, { id, status: { $ne: 'deleted' } }, lock ? { lockMode: LockMode.PESSIMISTIC_WRITE } : {});
    if (!document) throw notFound(`Document ${id} not found`);
    return document;
  }
}

/** A document that cannot be read: it fails at once, with this message as the reason. */
class IngestError extends Error {}
