import { randomUUID } from 'node:crypto';
import {
  badRequest,
  LockMode,
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
import { KnowledgeDocument, type DocumentStatus, type SourceType } from './document.entity.ts';
import {
  documentUsage,
  FILE_PURPOSE,
  liveDocument,
  metadataChanges,
  refreshSearchVector,
  searchMetadata,
  SOURCE,
  toRecord,
  type DocumentMetadata,
  type DocumentRecord,
} from './documents.service.ts';
import { Ingestion, type IngestionState } from './ingestion.entity.ts';
import type { KnowledgeIndex } from './knowledge-index.ts';
import type { ParsedText, ParseTask } from './parse.worker.ts';
import { loadedParsers, type ParserContribution } from './parsers.ts';

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

/** Failures worth another attempt: the embedding provider, not the document. */
const retryable = (error: unknown) => error instanceof RpcError && error.code === 'UPSTREAM_ERROR';

/** A run of ingestion for the document's latest version, and its job, queued in `em`'s transaction. */
export async function queueIngestion(jobs: Jobs, ctx: AuthenticatedContext, em: EntityManager, document: KnowledgeDocument): Promise<Ingestion> {
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
  ingestion.jobId = await jobs.enqueue('ingest', { ingestionId: ingestion.id }, { ctx, em });
  await em.flush();
  return ingestion;
}

/**
 * Ingestion: documents taken in from text, uploaded files or URLs, and the
 * `ingest` job that parses them to Markdown and chunks them in the worker
 * pool, and writes and embeds them in the search index.
 */
export class IngestionService {
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

  /** Built-in parsers first, then contributed ones (see loadedParsers). */
  get #parsers(): ParserContribution[] {
    this.#parserList ??= loadedParsers(this.#extensions);
    return this.#parserList;
  }

  /** The limits of FILE_PURPOSE uploads: the types the parsers read. */
  uploadLimits(): PurposeLimits {
    return {
      maxBytes: this.#config.KB_MAX_FILE_BYTES,
      maxFiles: 20,
      types: [...new Set(this.#parsers.flatMap((parser) => parser.types)), 'application/octet-stream'],
    };
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
    if (!(await this.#users.credentialHolder(ctx.subscriptionId, input.userId)))
      throw validationError([{ path: 'userId', message: `No user ${input.userId} in this subscription` }]);
  }

  #ingest(ctx: AuthenticatedContext, input: IngestInput, content: IngestContent): Promise<{ document: DocumentRecord; jobId: string }> {
    return ctx.em.fork().transactional((em) => this.#write(ctx, em, input, content));
  }

  /** The document (new, or a new version of documentId), its version and its ingestion job, in the caller's transaction. */
  async #write(ctx: AuthenticatedContext, em: EntityManager, input: IngestInput, content: IngestContent): Promise<{ document: DocumentRecord; jobId: string }> {
    const now = new Date();
    let document: KnowledgeDocument;
    const replaced = input.documentId ? await liveDocument(em, input.documentId, true) : null;
    await this.#checkQuota(em, ctx, replaced ? 0 : 1, content.sizeBytes - Number(replaced?.sizeBytes ?? 0));
    if (replaced) {
      document = replaced;
      Object.assign(document, metadataChanges(input), {
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
    await refreshSearchVector(em, ctx.subscriptionId, document.id);
    const ingestion = await queueIngestion(this.#jobs, ctx, em, document);
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
    // Queued, or running on a node that stopped; cancelled meanwhile, it does not start.
    const started = { state: 'running', startedAt: new Date(), error: null } as const;
    if (!(await this.#setIngestion(ctx, ingestionId, started, { status: 'processing', from: ['queued', 'running'] }))) return { state: 'cancelled' };
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
        {
          source: SOURCE,
          recordId: document.id,
          collection: document.collection ?? null,
          title: document.name,
          markdown: parsed.markdown,
          metadata: searchMetadata({ ...document, docType: content.parser.name }),
        },
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
      await this.#setIngestion(ctx, ingestionId, { state: 'done', finishedAt: new Date() }, { status: 'ready' });
      return { state: 'done', chunks: written.chunks };
    } catch (error) {
      const reason = error instanceof IngestError || error instanceof RpcError ? error.message : 'The document could not be processed';
      if (!(error instanceof IngestError || error instanceof RpcError)) ctx.log.error({ err: error, ingestionId }, 'ingestion failed');
      const last = job.attempt > 3;
      if (retryable(error) && !last) {
        await this.#setIngestion(ctx, ingestionId, { state: 'queued', error: reason });
        throw error;
      }
      await this.#setIngestion(ctx, ingestionId, { state: 'failed', error: reason, finishedAt: new Date() }, { status: 'failed', error: reason });
      return { state: 'failed' };
    }
  }

  /** Refuses an ingestion that would take the subscription past its limits (checked in the ingesting transaction). */
  async #checkQuota(em: EntityManager, ctx: AuthenticatedContext, moreDocuments: number, moreBytes: number): Promise<void> {
    const used = await documentUsage(em, ctx.subscriptionId);
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
    return (
      this.#parsers.find((parser) => parser.types.includes(type)) ?? (ending ? this.#parsers.find((parser) => parser.extensions.includes(ending)) : undefined)
    );
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
    const parser = this.#parsers.find((candidate) => candidate.name === version.docType);
    if (!parser) throw new IngestError(`No parser named ${version.docType} is loaded`);
    const bytes = version.fileId ? await this.#fileBytes(ctx, version.fileId) : Buffer.from(await this.#versionText(ctx.em, version, 'source'), 'utf8');
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
  async #versionText(em: EntityManager, version: { subscriptionId: string; id: string }, column: 'source' | 'markdown'): Promise<string> {
    const [row] = await em.execute<{ text: string | null }[]>(
      `select ${column} as text from knowledge_base_document_version where subscription_id = ? and id = ?`,
      [version.subscriptionId, version.id],
    );
    return row?.text ?? '';
  }

  /**
   * Moves the ingestion on, and its document when `status` is given, unless
   * it has left the states `from` meanwhile (a cancel won): false then, and
   * nothing changes.
   */
  async #setIngestion(
    ctx: RequestContext,
    ingestionId: string,
    changes: Partial<Ingestion>,
    { status, error = null, from = ['running'] }: { status?: DocumentStatus; error?: string | null; from?: readonly IngestionState[] } = {},
  ): Promise<boolean> {
    return ctx.em.fork().transactional(async (em) => {
      // The ingestion's row first, then its document's, in the order a cancel (ingestion-jobs.service.ts) takes them: a run and a cancel at once wait, never deadlock.
      const ingestion = await em.findOneOrFail(Ingestion, { id: ingestionId }, { lockMode: LockMode.PESSIMISTIC_WRITE });
      if (!from.includes(ingestion.state)) return false;
      Object.assign(ingestion, changes);
      // The document shows the state of its latest version's ingestion, unless it was deleted.
      if (status)
        await em.nativeUpdate(
          KnowledgeDocument,
          { id: ingestion.documentId, version: ingestion.version, status: { $ne: 'deleted' } },
          { status, error, updatedAt: new Date() },
        );
      await em.flush();
      return true;
    });
  }
}

/** A document that cannot be read: it fails at once, with this message as the reason. */
class IngestError extends Error {}
