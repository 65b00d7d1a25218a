import { existsSync } from 'node:fs';
import { readdir } from 'node:fs/promises';
import path from 'node:path';
import {
  forbidden,
  isManager,
  RpcError,
  validationError,
  type AuthenticatedContext,
  type DataFolders,
  type DataScope,
  type DataScopeCatalogue,
  type Database,
  type EntityManager,
  type EventBus,
} from 'rpc-service/plugin';
import type { CheckpointConfig } from './config.ts';
import { importDiskRepository } from './disk-import.ts';
import { GitStore } from './git-store.ts';
import { loadGit, ScopeRepository, type Author, type Checkpoint, type Encoding, type FileChange } from './repository.ts';

interface CheckpointServiceDeps {
  db: Database;
  bus: EventBus;
  dataScopes: DataScopeCatalogue;
  dataFolders: DataFolders;
  userService: { self(ctx: AuthenticatedContext): Promise<{ email: string; username: string; firstName?: string | null; lastName?: string | null }> };
  config: CheckpointConfig;
}

/** How a scope is opened: to read it, or to write a file into it (which makes a file scope). */
type Opening = 'read' | 'create';

/**
 * Versioned data scopes: a git repository per subscription and scope, kept in
 * the database (plugins/checkpoint/repository.ts), so any node serves any
 * scope. A scope holds files written through the file operations, or the
 * records of a `core.dataScopes` contribution (exported before a status or
 * checkpoint, imported back by restore and rollback). One writer per scope at
 * a time: in this process by a queue per scope, across nodes by a PostgreSQL
 * advisory lock held by the transaction the work runs in.
 */
export class CheckpointService {
  readonly #deps: CheckpointServiceDeps;
  readonly #diskRoot: string;
  readonly #queues = new Map<string, Promise<unknown>>();

  constructor(deps: CheckpointServiceDeps) {
    this.#deps = deps;
    this.#diskRoot = deps.config.CHECKPOINT_DIR ? path.resolve(deps.config.CHECKPOINT_DIR) : deps.dataFolders.folder('checkpoints');
  }

  /** Where earlier releases kept the repositories, `<root>/<subscriptionId>/<scope>`: each moves into the database on its first use. */
  get diskRoot(): string {
    return this.#diskRoot;
  }

  /** The scopes of records, and the file scopes the subscription has made. */
  async listScopes(ctx: AuthenticatedContext): Promise<string[]> {
    const rows = await ctx.em.execute<{ name: string }[]>('select name from checkpoint_scope where subscription_id = ?', [ctx.subscriptionId]);
    return [...new Set([...this.#deps.dataScopes.names(), ...rows.map((row) => row.name), ...(await this.#diskScopes(ctx))])].sort();
  }

  getStatus(ctx: AuthenticatedContext, scope: string): Promise<{ isClean: boolean; files: { path: string; change: FileChange }[] }> {
    return this.#exclusive(ctx, scope, 'read', async (repository, em) => {
      await this.#syncRecords(ctx, em, scope, repository);
      return repository.status();
    });
  }

  listCheckpoints(ctx: AuthenticatedContext, scope: string, limit: number): Promise<Checkpoint[]> {
    return this.#exclusive(ctx, scope, 'read', (repository) => repository.log(limit));
  }

  async createCheckpoint(
    ctx: AuthenticatedContext,
    { scope, message, tagName }: { scope: string; message: string; tagName?: string },
  ): Promise<{ commitHash: string }> {
    const author = await this.#author(ctx);
    // Records are read under the lock, so a restore that ran meanwhile is in the checkpoint.
    const commitHash = await this.#exclusive(ctx, scope, 'read', async (repository, em) => {
      await this.#syncRecords(ctx, em, scope, repository);
      return repository.commit(message, author, tagName);
    });
    return { commitHash };
  }

  async tagRelease(
    ctx: AuthenticatedContext,
    { scope, commitHash, tagName, message }: { scope: string; commitHash: string; tagName: string; message: string },
  ): Promise<{ tagName: string }> {
    const author = await this.#author(ctx);
    await this.#exclusive(ctx, scope, 'read', (repository) => repository.tag(commitHash, tagName, message, author));
    return { tagName };
  }

  /** Makes the scope (and its records) equal the checkpoint, as a new checkpoint on top of the history. */
  restore(ctx: AuthenticatedContext, scope: string, hash: string): Promise<{ message: string }> {
    return this.#refresh(ctx, scope, hash, 'restore', async (repository, author) => {
      const message = `Restore checkpoint ${hash.slice(0, 7)}`;
      const head = await repository.restore(hash, message, author);
      return { head, message: `Scope ${scope} restored to checkpoint ${hash.slice(0, 7)} as the new checkpoint ${head.slice(0, 7)}` };
    });
  }

  /** Moves the scope back to the checkpoint and discards the checkpoints after it. */
  rollback(ctx: AuthenticatedContext, scope: string, hash: string): Promise<{ message: string }> {
    return this.#refresh(ctx, scope, hash, 'rollback', async (repository) => {
      const head = await repository.rollback(hash);
      return { head, message: `Scope ${scope} rolled back to checkpoint ${head.slice(0, 7)}; the checkpoints after it were discarded` };
    });
  }

  async writeFile(
    ctx: AuthenticatedContext,
    { scope, path: filepath, content, encoding }: { scope: string; path: string; content: string; encoding: Encoding },
  ): Promise<{ path: string; size: number }> {
    this.#refuseRecordScope(scope);
    const bytes = Buffer.from(content, encoding);
    if (bytes.length > this.#deps.config.CHECKPOINT_MAX_FILE_BYTES) {
      throw validationError([
        { path: 'content', message: `a file holds at most ${this.#deps.config.CHECKPOINT_MAX_FILE_BYTES} bytes; this one has ${bytes.length}` },
      ]);
    }
    return this.#exclusive(ctx, scope, 'create', (repository) => repository.writeFile(filepath, bytes, this.#deps.config.CHECKPOINT_MAX_FILES));
  }

  /** A file as it is now (for a scope of records, the record as it is in the database) or at a checkpoint. */
  async readFile(
    ctx: AuthenticatedContext,
    { scope, path: filepath, encoding, hash }: { scope: string; path: string; encoding: Encoding; hash?: string },
  ): Promise<{ path: string; content: string; encoding: Encoding }> {
    const files = hash ? undefined : await this.#recordsOf(ctx, ctx.em, scope);
    if (files) return { path: filepath, content: this.#recordFile(files, filepath, encoding), encoding };
    const content = await this.#exclusive(ctx, scope, 'read', (repository) => repository.readFile(filepath, hash));
    return { path: filepath, content: content.toString(encoding), encoding };
  }

  async listFiles(ctx: AuthenticatedContext, scope: string, hash?: string): Promise<{ path: string; size: number }[]> {
    const files = hash ? undefined : await this.#recordsOf(ctx, ctx.em, scope);
    if (files) return Object.entries(files).map(([filepath, text]) => ({ path: filepath, size: Buffer.byteLength(text) }));
    return this.#exclusive(ctx, scope, 'read', (repository) => repository.listFiles(hash));
  }

  async deleteFile(ctx: AuthenticatedContext, scope: string, filepath: string): Promise<{ success: true }> {
    this.#refuseRecordScope(scope);
    await this.#exclusive(ctx, scope, 'read', (repository) => repository.deleteFile(filepath));
    return { success: true };
  }

  /** The refs of a scope's repository, for its export (plugins/checkpoint/export.routes.ts). */
  exportRefs(ctx: AuthenticatedContext, scope: string): Promise<{ name: string; oid: string; peeled?: string }[]> {
    return this.#exclusive(ctx, scope, 'read', (repository) => repository.refs());
  }

  /** An object of a scope's repository as git keeps it loose, for its export; objects never change, so no lock is taken. */
  async exportObject(ctx: AuthenticatedContext, scope: string, oid: string): Promise<Buffer> {
    const object = await new GitStore(ctx.em, ctx.subscriptionId, scope).object(oid);
    if (!object) throw new RpcError('NOT_FOUND', `Object ${oid} not found in scope ${scope}`);
    return object;
  }

  /** Restore and rollback: records imported in the transaction of the git change, then dataScopeRefreshed to the caller. */
  async #refresh(
    ctx: AuthenticatedContext,
    scope: string,
    hash: string,
    action: 'restore' | 'rollback',
    change: (repository: ScopeRepository, author: Author) => Promise<{ head: string; message: string }>,
  ): Promise<{ message: string }> {
    const records = this.#deps.dataScopes.get(scope);
    if (records && !isManager(ctx.role)) throw forbidden(`Only an admin or staff member may ${action} scope ${scope}: it changes every member's ${scope}`);
    const author = await this.#author(ctx);
    const { head, message } = await this.#exclusive(ctx, scope, 'read', async (repository, em) => {
      if (records) await records.import(ctx, em, await repository.readTree(hash));
      return change(repository, author);
    });
    await this.#deps.bus.publish({
      name: 'dataScopeRefreshed',
      payload: { scope, hash: head, action },
      subscriptionId: ctx.subscriptionId,
      userIds: [ctx.userId],
    });
    return { message };
  }

  /**
   * Runs work on a scope with no other writer, in one transaction: queued
   * behind earlier work on the scope in this process and, on PostgreSQL,
   * holding the scope's advisory lock, so nodes take turns. Work reads the
   * database only through the `em` it is given: a read on another connection
   * while the lock's is held could wait for a pool all of whose connections
   * hold locks, and on the embedded database for the transaction itself.
   */
  #exclusive<T>(ctx: AuthenticatedContext, scope: string, opening: Opening, work: (repository: ScopeRepository, em: EntityManager) => Promise<T>): Promise<T> {
    const key = `${ctx.subscriptionId}/${scope}`;
    const locked = () =>
      ctx.em.fork().transactional(async (em) => {
        if (this.#deps.db.kind === 'postgresql') await em.execute('select pg_advisory_xact_lock(hashtext(?), hashtext(?))', ['checkpoint.scope', key]);
        const repository = new ScopeRepository(await loadGit(), em, ctx.subscriptionId, scope);
        await this.#open(ctx, em, scope, repository, opening);
        const result = await work(repository, em);
        await repository.store.flush();
        return result;
      });
    const previous = this.#queues.get(key) ?? Promise.resolve();
    const current = previous.then(locked, locked);
    const tail = current.catch(() => undefined);
    this.#queues.set(key, tail);
    void tail.then(() => {
      if (this.#queues.get(key) === tail) this.#queues.delete(key);
    });
    return current;
  }

  /**
   * Makes sure the scope has its row: a scope of records gets one on first
   * use, a file scope with its first file (within the subscription's limit);
   * a repository an earlier release kept on disk is moved in first.
   */
  async #open(ctx: AuthenticatedContext, em: EntityManager, scope: string, repository: ScopeRepository, opening: Opening): Promise<void> {
    if (await repository.exists()) return;
    const onDisk = path.join(this.#diskRoot, ctx.subscriptionId, scope);
    if (existsSync(path.join(onDisk, '.git', 'HEAD'))) {
      await repository.create();
      await importDiskRepository(repository, onDisk);
      return;
    }
    if (!this.#deps.dataScopes.get(scope)) {
      if (opening === 'read') throw new RpcError('NOT_FOUND', `Scope ${scope} not found`);
      const names = new Set(this.#deps.dataScopes.names());
      const rows = await em.execute<{ name: string }[]>('select name from checkpoint_scope where subscription_id = ?', [ctx.subscriptionId]);
      const fileScopes = new Set([...rows.map((row) => row.name), ...(await this.#diskScopes(ctx))].filter((name) => !names.has(name)));
      if (fileScopes.size >= this.#deps.config.CHECKPOINT_MAX_SCOPES) {
        throw validationError([{ path: 'scope', message: `a subscription has at most ${this.#deps.config.CHECKPOINT_MAX_SCOPES} file scopes` }]);
      }
    }
    await repository.create();
  }

  /** A scope of records' files become its records as they are in the database; a file scope is left as it is. */
  async #syncRecords(ctx: AuthenticatedContext, em: EntityManager, scope: string, repository: ScopeRepository): Promise<void> {
    const files = await this.#recordsOf(ctx, em, scope);
    if (files) await repository.syncFiles(files);
  }

  /** The records of a scope of records as files; undefined for a file scope. */
  async #recordsOf(ctx: AuthenticatedContext, em: EntityManager, scope: string): Promise<Record<string, string> | undefined> {
    return this.#deps.dataScopes.get(scope)?.export(ctx, em);
  }

  #recordFile(files: Record<string, string>, filepath: string, encoding: Encoding): string {
    const text = files[filepath];
    if (text === undefined) throw new RpcError('NOT_FOUND', `File ${filepath} not found`);
    return Buffer.from(text).toString(encoding);
  }

  #refuseRecordScope(scope: string): void {
    const records: DataScope | undefined = this.#deps.dataScopes.get(scope);
    if (records)
      throw validationError([
        { path: 'scope', message: `scope ${scope} holds ${records.describe.replace(/\.$/, '').toLowerCase()}; change them through their own operations` },
      ]);
  }

  /** File scopes an earlier release kept on disk that have not moved into the database yet. */
  async #diskScopes(ctx: AuthenticatedContext): Promise<string[]> {
    const folder = path.join(this.#diskRoot, ctx.subscriptionId);
    if (!existsSync(folder)) return [];
    const entries = await readdir(folder, { withFileTypes: true });
    return entries.filter((entry) => entry.isDirectory() && existsSync(path.join(folder, entry.name, '.git', 'HEAD'))).map((entry) => entry.name);
  }

  /** The caller as a checkpoint's author: their name when they gave one, else their username. */
  async #author(ctx: AuthenticatedContext): Promise<Author> {
    const user = await this.#deps.userService.self(ctx);
    const name = [user.firstName, user.lastName].filter(Boolean).join(' ').trim();
    return { name: name || user.username, email: user.email };
  }
}
