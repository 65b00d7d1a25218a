import { existsSync } from 'node:fs';
import { readdir } from 'node:fs/promises';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
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
  type WorkerPool,
} from 'rpc-service/plugin';
import type { CheckpointConfig } from './config.ts';
import type { Author, Checkpoint, Encoding, FileChange, GitOutcome, GitTask } from './git.worker.ts';

const GIT_WORKER = fileURLToPath(new URL('./git.worker.ts', import.meta.url));

/** A task for the worker, without the folder the service fills in. */
type ScopeTask = GitTask extends infer T ? (T extends GitTask ? Omit<T, 'dir'> : never) : never;

interface CheckpointServiceDeps {
  db: Database;
  pool: WorkerPool;
  bus: EventBus;
  dataScopes: DataScopeCatalogue;
  dataFolders: DataFolders;
  userService: { self(ctx: AuthenticatedContext): Promise<{ email: string; username: string; firstName?: string | null; lastName?: string | null }> };
  config: CheckpointConfig;
}

/**
 * Versioned data scopes: a git repository per subscription and scope, worked
 * on in the worker pool. A scope holds files written through the file
 * operations, or the records of a `core.dataScopes` contribution (exported
 * before a status or checkpoint, imported back by restore and rollback).
 * One writer per scope at a time: in this process by a queue per scope, across
 * nodes sharing the folder by a PostgreSQL advisory lock held meanwhile.
 */
export class CheckpointService {
  readonly #deps: CheckpointServiceDeps;
  readonly #root: string;
  readonly #queues = new Map<string, Promise<unknown>>();

  constructor(deps: CheckpointServiceDeps) {
    this.#deps = deps;
    this.#root = deps.config.CHECKPOINT_DIR ? path.resolve(deps.config.CHECKPOINT_DIR) : deps.dataFolders.folder('checkpoints');
  }

  /** The folder holding a folder per subscription, each holding its scopes' repositories. */
  get root(): string {
    return this.#root;
  }

  /** The scopes of records, and the file scopes the subscription has made. */
  async listScopes(ctx: AuthenticatedContext): Promise<string[]> {
    return [...new Set([...this.#deps.dataScopes.names(), ...(await this.#fileScopes(ctx))])].sort();
  }

  getStatus(ctx: AuthenticatedContext, scope: string): Promise<{ isClean: boolean; files: { path: string; change: FileChange }[] }> {
    return this.#exclusive(ctx, scope, async (em) => this.#git(ctx, scope, { op: 'status', files: await this.#recordsOf(ctx, em, scope) }));
  }

  listCheckpoints(ctx: AuthenticatedContext, scope: string, limit: number): Promise<Checkpoint[]> {
    return this.#exclusive(ctx, scope, () => this.#git(ctx, scope, { op: 'log', limit }));
  }

  async createCheckpoint(
    ctx: AuthenticatedContext,
    { scope, message, tagName }: { scope: string; message: string; tagName?: string },
  ): Promise<{ commitHash: string }> {
    const author = await this.#author(ctx);
    // Records are read under the lock, so a restore that ran meanwhile is in the checkpoint.
    const commitHash = await this.#exclusive(ctx, scope, async (em) =>
      this.#git<string>(ctx, scope, { op: 'commit', message, author, tag: tagName, files: await this.#recordsOf(ctx, em, scope) }),
    );
    return { commitHash };
  }

  async tagRelease(
    ctx: AuthenticatedContext,
    { scope, commitHash, tagName, message }: { scope: string; commitHash: string; tagName: string; message: string },
  ): Promise<{ tagName: string }> {
    const author = await this.#author(ctx);
    return { tagName: await this.#exclusive(ctx, scope, () => this.#git<string>(ctx, scope, { op: 'tag', hash: commitHash, name: tagName, message, author })) };
  }

  /** Makes the scope (and its records) equal the checkpoint, as a new checkpoint on top of the history. */
  restore(ctx: AuthenticatedContext, scope: string, hash: string): Promise<{ message: string }> {
    return this.#refresh(ctx, scope, hash, 'restore', async (author) => {
      const message = `Restore checkpoint ${hash.slice(0, 7)}`;
      const head = await this.#git<string>(ctx, scope, { op: 'restore', hash, message, author });
      return { head, message: `Scope ${scope} restored to checkpoint ${hash.slice(0, 7)} as the new checkpoint ${head.slice(0, 7)}` };
    });
  }

  /** Moves the scope back to the checkpoint and discards the checkpoints after it. */
  rollback(ctx: AuthenticatedContext, scope: string, hash: string): Promise<{ message: string }> {
    return this.#refresh(ctx, scope, hash, 'rollback', async () => {
      const head = await this.#git<string>(ctx, scope, { op: 'rollback', hash });
      return { head, message: `Scope ${scope} rolled back to checkpoint ${head.slice(0, 7)}; the checkpoints after it were discarded` };
    });
  }

  async writeFile(
    ctx: AuthenticatedContext,
    { scope, path: filepath, content, encoding }: { scope: string; path: string; content: string; encoding: Encoding },
  ): Promise<{ path: string; size: number }> {
    this.#refuseRecordScope(scope);
    const size = Buffer.byteLength(content, encoding);
    if (size > this.#deps.config.CHECKPOINT_MAX_FILE_BYTES) {
      throw validationError([{ path: 'content', message: `a file holds at most ${this.#deps.config.CHECKPOINT_MAX_FILE_BYTES} bytes; this one has ${size}` }]);
    }
    return this.#exclusive(ctx, scope, async () => {
      if (!existsSync(this.#dir(ctx, scope)) && (await this.#fileScopes(ctx)).length >= this.#deps.config.CHECKPOINT_MAX_SCOPES) {
        throw validationError([{ path: 'scope', message: `a subscription has at most ${this.#deps.config.CHECKPOINT_MAX_SCOPES} file scopes` }]);
      }
      return this.#git(ctx, scope, { op: 'writeFile', path: filepath, content, encoding, maxFiles: this.#deps.config.CHECKPOINT_MAX_FILES });
    });
  }

  /** A file as it is now (for a scope of records, the record as it is in the database) or at a checkpoint. */
  async readFile(
    ctx: AuthenticatedContext,
    { scope, path: filepath, encoding, hash }: { scope: string; path: string; encoding: Encoding; hash?: string },
  ): Promise<{ path: string; content: string; encoding: Encoding }> {
    const files = hash ? undefined : await this.#recordsOf(ctx, ctx.em, scope);
    if (files) return { path: filepath, content: this.#recordFile(files, filepath, encoding), encoding };
    return this.#exclusive(ctx, scope, () => this.#git(ctx, scope, { op: 'readFile', path: filepath, encoding, hash }));
  }

  async listFiles(ctx: AuthenticatedContext, scope: string, hash?: string): Promise<{ path: string; size: number }[]> {
    const files = hash ? undefined : await this.#recordsOf(ctx, ctx.em, scope);
    if (files) return Object.entries(files).map(([filepath, text]) => ({ path: filepath, size: Buffer.byteLength(text) }));
    return this.#exclusive(ctx, scope, () => this.#git(ctx, scope, { op: 'listFiles', hash }));
  }

  deleteFile(ctx: AuthenticatedContext, scope: string, filepath: string): Promise<{ success: true }> {
    this.#refuseRecordScope(scope);
    return this.#exclusive(ctx, scope, () => this.#git(ctx, scope, { op: 'deleteFile', path: filepath }));
  }

  /** Restore and rollback: records imported in the transaction of the git change, then dataScopeRefreshed to the caller. */
  async #refresh(
    ctx: AuthenticatedContext,
    scope: string,
    hash: string,
    action: 'restore' | 'rollback',
    change: (author: Author) => Promise<{ head: string; message: string }>,
  ): Promise<{ message: string }> {
    const records = this.#deps.dataScopes.get(scope);
    if (records && !isManager(ctx.role)) throw forbidden(`Only an admin or staff member may ${action} scope ${scope}: it changes every member's ${scope}`);
    const author = await this.#author(ctx);
    const { head, message } = await this.#exclusive(ctx, scope, (em) =>
      records
        ? em.transactional(async (tx) => {
            await records.import(ctx, tx, await this.#git(ctx, scope, { op: 'readTree', hash }));
            return change(author);
          })
        : change(author),
    );
    await this.#deps.bus.publish({
      name: 'dataScopeRefreshed',
      payload: { scope, hash: head, action },
      subscriptionId: ctx.subscriptionId,
      userIds: [ctx.userId],
    });
    return { message };
  }

  /**
   * Runs work on a scope with no other writer: queued behind earlier work on
   * the scope in this process and, on PostgreSQL, inside a transaction that
   * holds the scope's advisory lock, so nodes sharing the folder take turns.
   * Work reads the database only through the `em` it is given: a read on
   * another connection while the lock's is held could wait for a pool all of
   * whose connections hold locks, and on the embedded database for the
   * transaction itself.
   */
  #exclusive<T>(ctx: AuthenticatedContext, scope: string, work: (em: EntityManager) => Promise<T>): Promise<T> {
    const key = `${ctx.subscriptionId}/${scope}`;
    const locked = () =>
      this.#deps.db.kind === 'postgresql'
        ? ctx.em.fork().transactional(async (tx) => {
            await tx.execute('select pg_advisory_xact_lock(hashtext(?), hashtext(?))', ['checkpoint.scope', key]);
            return work(tx);
          })
        : work(ctx.em);
    const previous = this.#queues.get(key) ?? Promise.resolve();
    const current = previous.then(locked, locked);
    const tail = current.catch(() => undefined);
    this.#queues.set(key, tail);
    void tail.then(() => {
      if (this.#queues.get(key) === tail) this.#queues.delete(key);
    });
    return current;
  }

  async #git<T>(ctx: AuthenticatedContext, scope: string, task: ScopeTask): Promise<T> {
    const dir = this.#dir(ctx, scope);
    // Scopes of records exist for every subscription; file scopes come into being with their first file.
    if (!existsSync(path.join(dir, '.git', 'HEAD')) && !this.#deps.dataScopes.get(scope) && task.op !== 'writeFile') {
      throw new RpcError('NOT_FOUND', `Scope ${scope} not found`);
    }
    const outcome = await this.#deps.pool.run<GitOutcome<T>>(GIT_WORKER, { ...task, dir });
    if (!outcome.ok) throw new RpcError(outcome.code, outcome.message);
    return outcome.value;
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

  async #fileScopes(ctx: AuthenticatedContext): Promise<string[]> {
    const folder = path.join(this.#root, ctx.subscriptionId);
    if (!existsSync(folder)) return [];
    const entries = await readdir(folder, { withFileTypes: true });
    return entries
      .filter((entry) => entry.isDirectory() && !this.#deps.dataScopes.get(entry.name) && existsSync(path.join(folder, entry.name, '.git', 'HEAD')))
      .map((entry) => entry.name);
  }

  #dir(ctx: AuthenticatedContext, scope: string): string {
    return path.join(this.#root, ctx.subscriptionId, scope);
  }

  /** The caller as a checkpoint's author: their name when they gave one, else their username. */
  async #author(ctx: AuthenticatedContext): Promise<Author> {
    const user = await this.#deps.userService.self(ctx);
    const name = [user.firstName, user.lastName].filter(Boolean).join(' ').trim();
    return { name: name || user.username, email: user.email };
  }
}
