import { createHash, randomUUID, type Hash } from 'node:crypto';
import { Transform, type Readable, type TransformCallback } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { LockMode } from '@mikro-orm/core';
import * as v from 'valibot';
import type { EntityManager } from '@mikro-orm/postgresql';
import { randomToken, sha256Hex } from '../credentials/crypto.ts';
import type { Config } from '../base/config.ts';
import type { Database } from '../db/orm.ts';
import type { Logger } from '../base/logger.ts';
import type { AuthenticatedContext } from '../base/context.ts';
import { wireTimestamp } from '../base/schemas.ts';
import { badRequest, counted, notFound, RpcError } from '../base/errors.ts';
import { StoredFile } from './file.entity.ts';
import { UploadKey } from './upload-key.entity.ts';
import { contentMatchesType, extensionFor, SNIFF_BYTES } from './sniff.ts';
import type { FileStorage } from './storage.ts';
import { isUuid } from '../base/schemas.ts';

/** What one kind of upload accepts, declared once by whoever owns it (a plugin, at start). */
export interface PurposeLimits {
  /** Largest file; UPLOAD_MAX_BYTES caps it. */
  maxBytes: number;
  /** Accepted MIME types; the content must also match a type's signature where one is known. */
  types: readonly string[];
  /** Most files one upload key takes, over all its requests. */
  maxFiles: number;
}

/** A file as upload answers and finalizing operations describe it. */
export interface FileInfo {
  fileId: string;
  fileName: string;
  mimeType: string;
  size: number;
}

export interface IncomingFile {
  /** Destroyed when a check fails: hand in a stream of its own, never the HTTP request itself. */
  content: Readable;
  /** The type the client declared (Content-Type of the body or of the multipart part). */
  mimeType: string;
  /** The client's name for it, if any; cleaned before it is stored. */
  fileName?: string;
  /** The multipart field it came in, named in validation issues. */
  field?: string;
}

export interface IssuedUploadKey {
  uploadKey: string;
  expiresAt: Date;
}

/** What an operation issuing an upload key answers: the key, the URL to send files to, and when the key expires. */
export const UPLOAD_KEY_ANSWER = v.strictObject({ uploadKey: v.string(), uploadUrl: v.string(), expiresAt: wireTimestamp });
/** The same with the purpose's limits, for operations that tell the client what it may send. */
export const UPLOAD_KEY_WITH_LIMITS = v.strictObject({ ...UPLOAD_KEY_ANSWER.entries, maxBytes: v.number(), maxFiles: v.number(), types: v.array(v.string()) });

const KEY_FORMAT = /^[A-Za-z0-9_-]{43}$/;
const SWEEP_EVERY_MS = 5 * 60_000;
// Unfinalized files and keys are swept this long after the key expired, well past any finalize still in flight.
const SWEEP_GRACE_MS = 60_000;

/** The path a finalized file is served at, and back. */
export const fileUrl = (fileId: string): string => `/api/files/${fileId}`;
export const fileIdOfUrl = (url: string | null): string | undefined => (url ? /^\/api\/files\/([0-9a-f-]{36})$/.exec(url)?.[1] : undefined);

export const toFileInfo = (file: StoredFile): FileInfo => ({
  fileId: file.id,
  fileName: file.fileName,
  mimeType: file.mimeType,
  size: file.size,
});

const fileIssue = (field: string | undefined, message: string): RpcError =>
  new RpcError('VALIDATION_ERROR', message, { issues: [{ path: field ?? 'file', message }] });

/** The bare MIME type of a Content-Type value, lower-cased and without parameters. */
const bareType = (contentType: string): string => contentType.split(';')[0]!.trim().toLowerCase();

/** A name fit to show and to offer in Content-Disposition: no folders, no control characters, at most 255 characters. */
function cleanFileName(given: string | undefined, mimeType: string): string {
  const last = (given ?? '').split(/[\\/]/).pop() ?? '';
  // eslint-disable-next-line no-control-regex -- control characters are what it removes
  const cleaned = Array.from(last.replace(/[\u0000-\u001f\u007f]/g, '').trim())
    .slice(0, 255)
    .join('');
  if (cleaned !== '' && cleaned !== '.' && cleaned !== '..') return cleaned;
  const extension = extensionFor(mimeType);
  return extension ? `upload.${extension}` : 'upload';
}

/**
 * Counts, hashes and checks the bytes on their way to storage: over the size
 * limit it fails at once (PAYLOAD_TOO_LARGE), and it fails when the first
 * bytes do not match the declared type.
 */
class Inspector extends Transform {
  size = 0;
  readonly #hash: Hash = createHash('sha256');
  #head: Buffer | null = Buffer.alloc(0);

  constructor(
    private readonly maxBytes: number,
    private readonly mimeType: string,
    private readonly field: string | undefined,
  ) {
    super();
  }

  /** Once, after the last byte. */
  digest(): string {
    return this.#hash.digest('hex');
  }

  override _transform(chunk: Buffer, _encoding: BufferEncoding, done: TransformCallback): void {
    this.size += chunk.length;
    if (this.size > this.maxBytes) {
      return done(new RpcError('PAYLOAD_TOO_LARGE', `The file exceeds the limit of ${this.maxBytes} bytes`));
    }
    this.#hash.update(chunk);
    if (this.#head) {
      this.#head = Buffer.concat([this.#head, chunk]);
      if (this.#head.length >= SNIFF_BYTES) {
        const error = this.#checkHead();
        if (error) return done(error);
      }
    }
    done(null, chunk);
  }

  override _flush(done: TransformCallback): void {
    if (this.size === 0) return done(fileIssue(this.field, 'The file is empty'));
    done(this.#head ? this.#checkHead() : null);
  }

  #checkHead(): RpcError | null {
    const head = this.#head!;
    this.#head = null;
    return contentMatchesType(this.mimeType, head) ? null : fileIssue(this.field, `The file's content is not of type ${this.mimeType}`);
  }
}

type Purposes = Map<string, PurposeLimits & { group: string }>;

/**
 * Upload keys, the files that come through them, and their bytes. A purpose
 * (say 'profile-picture') is declared with its limits; an operation issues a
 * key for it; the client sends files to `/api/uploads/<key>`; another
 * operation finalizes the key, which marks it used and keeps its files.
 */
export class UploadService {
  readonly #db: Database;
  readonly #storage: FileStorage;
  readonly #logger: Logger;
  readonly #maxBytes: number;
  readonly #keyTtlMs: number;
  /** Every purpose with the group of the plugin that declared it: shared by the service and each plugin's view of it. */
  readonly #purposes: Purposes;
  /** The group whose purposes this view declares (`forGroup`); null for the core's own service. */
  readonly #group: string | null;
  readonly #deps: ConstructorParameters<typeof UploadService>[0];
  #sweeper?: NodeJS.Timeout;
  #sweeping?: Promise<unknown>;

  constructor(
    { db, config, logger, fileStorage }: { db: Database; config: Config; logger: Logger; fileStorage: FileStorage },
    shared?: { purposes: Purposes; group: string },
  ) {
    this.#db = db;
    this.#storage = fileStorage;
    this.#logger = logger;
    this.#maxBytes = config.uploadMaxBytes;
    this.#keyTtlMs = config.uploadKeyTtlSeconds * 1000;
    this.#purposes = shared?.purposes ?? new Map();
    this.#group = shared?.group ?? null;
    this.#deps = { db, config, logger, fileStorage };
  }

  /**
   * The service as one plugin receives it (core/app/app.ts): the purposes it
   * declares belong to its group, so an upload or file of theirs serves that
   * group to an API key's scopes (core/doors/upload-routes.ts).
   */
  forGroup(group: string): UploadService {
    return new UploadService(this.#deps, { purposes: this.#purposes, group });
  }

  definePurpose(name: string, limits: PurposeLimits): void {
    if (this.#group === null) throw new Error(`Upload purpose "${name}": purposes are declared by a plugin, through the uploadService it receives`);
    if (this.#purposes.has(name)) throw new Error(`Upload purpose "${name}" is already defined`);
    if (!(limits.maxBytes > 0 && limits.maxFiles >= 1 && limits.types.length > 0)) {
      throw new Error(`Upload purpose "${name}" needs a positive maxBytes, maxFiles of at least 1 and at least one type`);
    }
    this.#purposes.set(name, { ...limits, types: limits.types.map(bareType), group: this.#group });
  }

  /** A purpose's limits with UPLOAD_MAX_BYTES applied. */
  limitsOf(purpose: string): PurposeLimits {
    const declared = this.#purposes.get(purpose);
    if (!declared) throw new Error(`Upload purpose "${purpose}" is not defined`);
    const { group: _group, ...limits } = declared;
    return { ...limits, maxBytes: Math.min(limits.maxBytes, this.#maxBytes) };
  }

  /** The group of the plugin that declared a purpose; null for one no loaded plugin declares (a file kept from before). */
  groupOf(purpose: string): string | null {
    return this.#purposes.get(purpose)?.group ?? null;
  }

  /** A new key for the calling user; only its hash is stored. */
  async createKey(ctx: AuthenticatedContext, purpose: string): Promise<IssuedUploadKey> {
    this.limitsOf(purpose);
    const uploadKey = randomToken(32);
    const now = new Date();
    const expiresAt = new Date(now.getTime() + this.#keyTtlMs);
    ctx.em.create(UploadKey, {
      id: randomUUID(),
      subscriptionId: ctx.subscriptionId,
      userId: ctx.userId,
      keyHash: sha256Hex(uploadKey),
      purpose,
      expiresAt,
      usedAt: null,
      createdAt: now,
    });
    await ctx.em.flush();
    return { uploadKey, expiresAt };
  }

  /**
   * Starts receiving files through a key of the calling user; refuses before
   * any byte is read. `admit` is given the group of the key's purpose first,
   * and may refuse by throwing.
   */
  async begin(ctx: AuthenticatedContext, uploadKey: string, admit: (group: string | null) => void | Promise<void> = () => undefined): Promise<UploadBatch> {
    const key = usableKey(await this.#findKey(ctx.em, ctx, uploadKey));
    await admit(this.groupOf(key.purpose));
    const limits = this.limitsOf(key.purpose);
    const held = await ctx.em.count(StoredFile, { uploadKeyId: key.id });
    if (held >= limits.maxFiles) throw tooManyFiles(limits.maxFiles);
    return new UploadBatch(this.#db, this.#storage, ctx, key, limits, limits.maxFiles - held);
  }

  /**
   * Finalizes a key of the calling user: in one transaction the key is marked
   * used, its files are kept for good, and `finalize` does the caller's part
   * with the same EntityManager. If anything throws, nothing changes and the
   * key stays usable.
   */
  async consume<T>(ctx: AuthenticatedContext, uploadKey: string, purpose: string, finalize: (files: FileInfo[], em: EntityManager) => Promise<T>): Promise<T> {
    return this.#db.forkEm(ctx.subscriptionId).transactional(async (em) => {
      const key = usableKey(await this.#findKey(em, ctx, uploadKey, true));
      if (key.purpose !== purpose) throw badRequest(`This upload key was issued for ${key.purpose} uploads, not ${purpose}`);
      const files = await em.find(StoredFile, { uploadKeyId: key.id }, { orderBy: { createdAt: 'asc', id: 'asc' } });
      const now = new Date();
      key.usedAt = now;
      for (const file of files) file.finalizedAt = now;
      return finalize(files.map(toFileInfo), em);
    });
  }

  /**
   * A finalized file of the caller's subscription and its bytes; NOT_FOUND
   * otherwise. `admit` is given the group of the file's purpose before any
   * byte is read, and may refuse by throwing.
   */
  async open(
    ctx: AuthenticatedContext,
    fileId: string,
    admit: (group: string | null) => void | Promise<void> = () => undefined,
  ): Promise<{ file: StoredFile; content: Readable }> {
    const file = isUuid(fileId) ? await ctx.em.findOne(StoredFile, { id: fileId, finalizedAt: { $ne: null } }) : null;
    if (!file) throw notFound(`File ${fileId} not found`);
    await admit(this.groupOf(file.purpose));
    return { file, content: await this.#storage.get(file.storagePath) };
  }

  /** Deletes a file of the caller's subscription, record and bytes; one that does not exist is left at that. */
  async delete(ctx: AuthenticatedContext, fileId: string): Promise<void> {
    const file = isUuid(fileId) ? await ctx.em.findOne(StoredFile, { id: fileId }) : null;
    if (!file) return;
    await ctx.em.remove(file).flush();
    await this.#storage.delete(file.storagePath);
  }

  /**
   * For the plugin that removes a user, inside its transaction: the user's
   * upload keys go, their files stay with the subscription without an uploader.
   */
  async forgetUser(em: EntityManager, userId: string): Promise<void> {
    await em.nativeDelete(UploadKey, { userId });
    await em.nativeUpdate(StoredFile, { userId }, { userId: null });
  }

  /**
   * Removes files that were never finalized, keys that have expired and the
   * storage's unfinished writes, in every subscription. Runs every few minutes on each node; `delete ...
   * returning` lets only one node remove each file's bytes.
   */
  async sweep(): Promise<number> {
    const cutoff = new Date(Date.now() - SWEEP_GRACE_MS);
    // A file whose key is already gone (its user was deleted, say) can no longer be finalized either.
    const orphans = await this.#db.execute<{ storage_path: string }>(
      `delete from core_file where finalized_at is null
         and (upload_key_id is null or upload_key_id in (select k.id from core_upload_key k where k.subscription_id = core_file.subscription_id and k.expires_at < ?))
       returning storage_path`,
      [cutoff],
    );
    for (const { storage_path } of orphans) {
      await this.#storage.delete(storage_path).catch((err) => this.#logger.warn({ err }, 'could not delete an unfinalized upload'));
    }
    await this.#db.execute('delete from core_upload_key where expires_at < ?', [cutoff]);
    // Bytes of uploads whose node stopped mid-file: never recorded, so no row above names them.
    const unfinished = await this.#storage.sweep(cutoff);
    return orphans.length + unfinished;
  }

  start(): void {
    this.#sweeper = setInterval(() => {
      this.#sweeping = this.sweep().catch((err) => this.#logger.error({ err }, 'upload sweep failed'));
    }, SWEEP_EVERY_MS).unref();
  }

  async stop(): Promise<void> {
    clearInterval(this.#sweeper);
    await this.#sweeping;
  }

  async #findKey(em: EntityManager, ctx: AuthenticatedContext, uploadKey: string, lock = false): Promise<UploadKey | null> {
    if (!KEY_FORMAT.test(uploadKey)) return null;
    // The tenant filter keeps other subscriptions out; the user condition keeps other users of this one out.
    return em.findOne(UploadKey, { keyHash: sha256Hex(uploadKey), userId: ctx.userId }, lock ? { lockMode: LockMode.PESSIMISTIC_WRITE } : {});
  }
}

function usableKey(key: UploadKey | null): UploadKey {
  if (!key) throw notFound('Upload key not found');
  if (key.usedAt) throw badRequest('This upload key has already been used; request a new one');
  if (key.expiresAt.getTime() <= Date.now()) throw badRequest('This upload key has expired; request a new one');
  return key;
}

export const tooManyFiles = (maxFiles: number): RpcError => fileIssue(undefined, `This upload key takes at most ${counted(maxFiles, 'file')}`);

/**
 * The files of one upload request. Each is checked and stored as it streams
 * in; commit() records them all against the key, abort() removes their bytes.
 */
export class UploadBatch {
  readonly #stored: StoredFile[] = [];

  constructor(
    private readonly db: Database,
    private readonly storage: FileStorage,
    private readonly ctx: AuthenticatedContext,
    private readonly key: UploadKey,
    readonly limits: PurposeLimits,
    /** How many more files the key takes. */
    readonly remainingFiles: number,
  ) {}

  async add(incoming: IncomingFile): Promise<void> {
    if (this.#stored.length >= this.remainingFiles) throw tooManyFiles(this.limits.maxFiles);
    const mimeType = bareType(incoming.mimeType);
    if (!this.limits.types.includes(mimeType)) {
      throw fileIssue(incoming.field, `Files of type ${mimeType || '(none)'} are not accepted here; accepted: ${this.limits.types.join(', ')}`);
    }
    const id = randomUUID();
    const file: StoredFile = {
      id,
      subscriptionId: this.ctx.subscriptionId,
      userId: this.ctx.userId,
      uploadKeyId: this.key.id,
      purpose: this.key.purpose,
      fileName: cleanFileName(incoming.fileName, mimeType),
      mimeType,
      size: 0,
      sha256: '',
      storagePath: `${this.ctx.subscriptionId}/${id}`,
      finalizedAt: null,
      createdAt: new Date(),
    };
    // Taken in the order the files arrive (a later small file may be stored first), and counted while in flight.
    this.#stored.push(file);
    const inspector = new Inspector(this.limits.maxBytes, mimeType, incoming.field);
    // Both sides are watched from the start: a check may fail before the storage is ready to read.
    const settled = await Promise.allSettled([pipeline(incoming.content, inspector), this.storage.put(file.storagePath, inspector)]);
    const reasons = settled.flatMap((result) => (result.status === 'rejected' ? [result.reason as unknown] : []));
    if (reasons.length > 0) {
      this.#stored.splice(this.#stored.indexOf(file), 1);
      // The check's own answer rather than the "premature close" it causes downstream.
      throw reasons.find((reason) => reason instanceof RpcError) ?? reasons.at(-1);
    }
    file.size = inspector.size;
    file.sha256 = inspector.digest();
  }

  /** Records the stored files against the key, re-checked under a lock so that racing requests cannot overfill it. */
  async commit(): Promise<FileInfo[]> {
    if (this.#stored.length === 0) throw fileIssue(undefined, 'The request holds no file');
    await this.db.forkEm(this.ctx.subscriptionId).transactional(async (em) => {
      const key = usableKey(await em.findOne(UploadKey, { id: this.key.id }, { lockMode: LockMode.PESSIMISTIC_WRITE }));
      const held = await em.count(StoredFile, { uploadKeyId: key.id });
      if (held + this.#stored.length > this.limits.maxFiles) throw tooManyFiles(this.limits.maxFiles);
      for (const file of this.#stored) em.create(StoredFile, file);
    });
    return this.#stored.map(toFileInfo);
  }

  /** Removes the bytes of every file stored so far (nothing was recorded for them). */
  async abort(): Promise<void> {
    await Promise.all(this.#stored.map((file) => this.storage.delete(file.storagePath)));
  }
}
