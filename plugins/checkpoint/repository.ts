import type * as IsomorphicGit from 'isomorphic-git';
import { onFirstUse, RpcError, validationError, type EntityManager } from 'rpc-service/plugin';
import { bytes, GitStore, GITDIR, MAIN } from './git-store.ts';

export interface Author {
  name: string;
  email: string;
}

export type Encoding = 'utf8' | 'base64';
export type FileChange = 'added' | 'modified' | 'deleted';

export interface Checkpoint {
  hash: string;
  author: string;
  date: string;
  message: string;
  tags: string[];
}

interface Entry {
  path: string;
  oid: string;
}

const TAGS = 'refs/tags/';
// Rows per statement: the files of a scope are written in batches, never one statement per file nor one for ten thousand.
const BATCH = 200;
// Pending bytes read at once when a checkpoint writes them as blobs (each at most CHECKPOINT_MAX_FILE_BYTES).
const BLOB_BATCH = 16;

const conflict = (filepath: string) => new RpcError('CONFLICT', `${filepath} clashes with a file or folder of the scope`);

/** isomorphic-git, loaded by the first checkpoint operation: a process that versions nothing does not carry it. */
export const loadGit = onFirstUse(() => import('isomorphic-git'));

/**
 * One scope's repository and files in the database, worked on through the
 * connection that holds the scope (plugins/checkpoint/checkpoint.service.ts):
 * git objects and refs through isomorphic-git over GitStore, the files as
 * rows of checkpoint_file (git's working tree and index in one). Every
 * method leaves its writes in the transaction; `flush` is called by the
 * service once the work succeeded.
 */
export class ScopeRepository {
  /** isomorphic-git's commands and error classes, as `loadGit` gives them. */
  readonly #isogit: typeof IsomorphicGit.default;
  readonly #gitErrors: typeof IsomorphicGit.Errors;
  readonly #em: EntityManager;
  readonly #key: [string, string];
  readonly store: GitStore;
  // What isomorphic-git may keep between the calls of one operation; never longer, since other nodes change the scope.
  readonly #cache = {};

  constructor(isogit: typeof IsomorphicGit, em: EntityManager, subscriptionId: string, scope: string) {
    this.#isogit = isogit.default;
    this.#gitErrors = isogit.Errors;
    this.#em = em;
    this.#key = [subscriptionId, scope];
    this.store = new GitStore(em, subscriptionId, scope);
  }

  get #git() {
    return { fs: this.store.fs, gitdir: GITDIR, cache: this.#cache };
  }

  async exists(): Promise<boolean> {
    const [row] = await this.#em.execute('select 1 from checkpoint_scope where subscription_id = ? and name = ?', this.#key);
    return Boolean(row);
  }

  async create(): Promise<void> {
    await this.#em.execute('insert into checkpoint_scope (subscription_id, name, created_at) values (?, ?, now()) on conflict do nothing', this.#key);
  }

  /** The paths whose file differs from the last checkpoint's: rows of the index, no object read. */
  async status(): Promise<{ isClean: boolean; files: { path: string; change: FileChange }[] }> {
    const rows = await this.#em.execute<{ path: string; head_oid: string | null; work_oid: string | null }[]>(
      'select path, head_oid, work_oid from checkpoint_file where subscription_id = ? and scope = ? and work_oid is distinct from head_oid order by path collate "C"',
      this.#key,
    );
    const files = rows.map((row) => ({
      path: row.path,
      change: (row.head_oid === null ? 'added' : row.work_oid === null ? 'deleted' : 'modified') as FileChange,
    }));
    return { isClean: files.length === 0, files };
  }

  async writeFile(filepath: string, content: Buffer, maxFiles: number): Promise<{ path: string; size: number }> {
    const parts = filepath.split('/');
    const folders = parts.slice(1).map((_, index) => parts.slice(0, index + 1).join('/'));
    const [clash] = await this.#em.execute(
      `select 1 from checkpoint_file where subscription_id = ? and scope = ? and work_oid is not null and (starts_with(path, ?)${folders.map(() => ' or path = ?').join('')}) limit 1`,
      [...this.#key, `${filepath}/`, ...folders],
    );
    if (clash) throw conflict(filepath);
    const [counted] = await this.#em.execute<{ files: number; here: number }[]>(
      'select count(*)::int as files, count(*) filter (where path = ?)::int as here from checkpoint_file where subscription_id = ? and scope = ? and work_oid is not null',
      [filepath, ...this.#key],
    );
    if (counted!.here === 0 && counted!.files >= maxFiles) throw validationError([{ path: 'path', message: `a scope holds at most ${maxFiles} files` }]);
    await this.#put([{ path: filepath, content }]);
    return { path: filepath, size: content.length };
  }

  /** Makes the scope's files exactly these (a scope of records, from the database). */
  async syncFiles(files: Record<string, string | Buffer>): Promise<void> {
    const rows = await this.#em.execute<Entry[]>(
      'select path, work_oid as oid from checkpoint_file where subscription_id = ? and scope = ? and work_oid is not null',
      this.#key,
    );
    const current = new Map(rows.map((row) => [row.path, row.oid]));
    const changed: { path: string; content: Buffer; oid: string }[] = [];
    for (const [filepath, given] of Object.entries(files)) {
      const content = Buffer.isBuffer(given) ? given : Buffer.from(given);
      const { oid } = await this.#isogit.hashBlob({ object: content });
      if (current.get(filepath) !== oid) changed.push({ path: filepath, content, oid });
      current.delete(filepath);
    }
    for (let start = 0; start < changed.length; start += BATCH) await this.#put(changed.slice(start, start + BATCH));
    for (const filepath of current.keys()) await this.deleteFile(filepath);
  }

  /** Writes files as they are now; bytes wait in `content` until a checkpoint holds them. */
  async #put(files: { path: string; content: Buffer; oid?: string }[]): Promise<void> {
    const rows = await Promise.all(files.map(async (file) => ({ ...file, oid: file.oid ?? (await this.#isogit.hashBlob({ object: file.content })).oid })));
    await this.#em.execute(
      `insert into checkpoint_file (subscription_id, scope, path, head_oid, work_oid, size, content) values ${rows.map(() => '(?, ?, ?, null, ?, ?, ?)').join(', ')}
       on conflict (subscription_id, scope, path) do update set work_oid = excluded.work_oid, size = excluded.size,
         content = case when checkpoint_file.head_oid = excluded.work_oid then null else excluded.content end`,
      rows.flatMap((row) => [...this.#key, row.path, row.oid, row.content.length, row.content]),
    );
  }

  async deleteFile(filepath: string): Promise<void> {
    const [row] = await this.#em.execute<{ head_oid: string | null }[]>(
      'select head_oid from checkpoint_file where subscription_id = ? and scope = ? and path = ? and work_oid is not null',
      [...this.#key, filepath],
    );
    if (!row) throw new RpcError('NOT_FOUND', `File ${filepath} not found`);
    if (row.head_oid === null)
      await this.#em.execute('delete from checkpoint_file where subscription_id = ? and scope = ? and path = ?', [...this.#key, filepath]);
    else
      await this.#em.execute('update checkpoint_file set work_oid = null, size = 0, content = null where subscription_id = ? and scope = ? and path = ?', [
        ...this.#key,
        filepath,
      ]);
  }

  /** A file as it is now, or at a checkpoint. */
  async readFile(filepath: string, hash?: string): Promise<Buffer> {
    if (hash) {
      const blob = await this.#blobAt(await this.commitOf(hash), filepath);
      if (!blob) throw new RpcError('NOT_FOUND', `File ${filepath} not found at checkpoint ${hash}`);
      return blob;
    }
    const [row] = await this.#em.execute<{ work_oid: string; content: Uint8Array | null }[]>(
      'select work_oid, content from checkpoint_file where subscription_id = ? and scope = ? and path = ? and work_oid is not null',
      [...this.#key, filepath],
    );
    if (!row) throw new RpcError('NOT_FOUND', `File ${filepath} not found`);
    return row.content ? bytes(row.content) : Buffer.from((await this.#isogit.readBlob({ ...this.#git, oid: row.work_oid })).blob);
  }

  async listFiles(hash?: string): Promise<{ path: string; size: number }[]> {
    if (!hash) {
      return this.#em.execute<{ path: string; size: number }[]>(
        'select path, size from checkpoint_file where subscription_id = ? and scope = ? and work_oid is not null order by path collate "C"',
        this.#key,
      );
    }
    const { commit } = await this.#isogit.readCommit({ ...this.#git, oid: await this.commitOf(hash) });
    const entries = await this.#treeEntries(commit.tree);
    const sizes = await this.#sizesOf(entries.map((entry) => entry.oid));
    return entries.map((entry) => ({ path: entry.path, size: sizes.get(entry.oid)! }));
  }

  /** The files of a checkpoint as text (a scope of records' JSON files). */
  async readTree(hash: string): Promise<Record<string, string>> {
    const { commit } = await this.#isogit.readCommit({ ...this.#git, oid: await this.commitOf(hash) });
    const files: Record<string, string> = {};
    for (const entry of await this.#treeEntries(commit.tree))
      files[entry.path] = Buffer.from((await this.#isogit.readBlob({ ...this.#git, oid: entry.oid })).blob).toString('utf8');
    return files;
  }

  /** Everything the scope holds now as a checkpoint on `main`, tagged when a tag is given. */
  async commit(message: string, author: Author, tagName?: string): Promise<string> {
    // A refused tag leaves no checkpoint behind.
    if (tagName && (await this.store.ref(`${TAGS}${tagName}`))) throw new RpcError('CONFLICT', `Tag ${tagName} already exists in this scope`);
    await this.#writePendingBlobs();
    const files = await this.#em.execute<Entry[]>(
      'select path, work_oid as oid from checkpoint_file where subscription_id = ? and scope = ? and work_oid is not null',
      this.#key,
    );
    const tree = await this.#writeTree(files);
    const parent = await this.store.ref(MAIN);
    const hash = await this.#isogit.commit({ ...this.#git, ref: MAIN, message, author, tree, parent: parent ? [parent] : [] });
    if (tagName) await this.tag(hash, tagName, message, author);
    await this.#em.execute('delete from checkpoint_file where subscription_id = ? and scope = ? and work_oid is null', this.#key);
    await this.#em.execute(
      'update checkpoint_file set head_oid = work_oid, content = null where subscription_id = ? and scope = ? and (head_oid is distinct from work_oid or content is not null)',
      this.#key,
    );
    return hash;
  }

  async tag(hash: string, name: string, message: string, author: Author): Promise<void> {
    try {
      await this.#isogit.annotatedTag({ ...this.#git, ref: name, object: await this.commitOf(hash), message, tagger: author });
    } catch (error) {
      if (error instanceof this.#gitErrors.AlreadyExistsError) throw new RpcError('CONFLICT', `Tag ${name} already exists in this scope`);
      throw error;
    }
  }

  /** A new checkpoint whose files are those of an earlier one; the scope's files become them. */
  async restore(hash: string, message: string, author: Author): Promise<string> {
    const { commit } = await this.#isogit.readCommit({ ...this.#git, oid: await this.commitOf(hash) });
    const parent = await this.store.ref(MAIN);
    const head = await this.#isogit.commit({ ...this.#git, ref: MAIN, message, author, tree: commit.tree, parent: parent ? [parent] : [] });
    await this.#resetFiles(commit.tree);
    return head;
  }

  /** Moves `main` back to an earlier checkpoint; the scope's files become its files (as `git reset --hard` and `git clean`). */
  async rollback(hash: string): Promise<string> {
    const target = await this.commitOf(hash);
    const head = (await this.store.ref(MAIN))!;
    if (target !== head && !(await this.#isogit.isDescendent({ ...this.#git, oid: head, ancestor: target, depth: -1 }))) {
      throw new RpcError('NOT_FOUND', `Checkpoint ${hash} is not in the history of this scope`);
    }
    await this.#isogit.writeRef({ ...this.#git, ref: MAIN, value: target, force: true });
    await this.#resetFiles((await this.#isogit.readCommit({ ...this.#git, oid: target })).commit.tree);
    return target;
  }

  /** Every ref with the commit it names: `peeled` is the commit an annotated tag points at, undefined for `main`. */
  async refs(): Promise<{ name: string; oid: string; peeled?: string }[]> {
    const rows = await this.#em.execute<{ name: string; oid: string }[]>(
      'select name, oid from checkpoint_ref where subscription_id = ? and scope = ? order by name collate "C"',
      this.#key,
    );
    const refs: { name: string; oid: string; peeled?: string }[] = [];
    for (const { name, oid } of rows) {
      if (!name.startsWith(TAGS)) refs.push({ name, oid });
      else {
        const { type } = await this.#isogit.readObject({ ...this.#git, oid });
        refs.push({ name, oid, peeled: type === 'tag' ? (await this.#isogit.readTag({ ...this.#git, oid })).tag.object : oid });
      }
    }
    return refs;
  }

  /** The latest checkpoints on `main`, newest first, with the tags that point at them. */
  async log(limit: number): Promise<Checkpoint[]> {
    if (!(await this.store.ref(MAIN))) return [];
    const tagsOf = new Map<string, string[]>();
    for (const { name, peeled } of await this.refs()) {
      if (peeled) tagsOf.set(peeled, [...(tagsOf.get(peeled) ?? []), name.slice(TAGS.length)]);
    }
    const entries = await this.#isogit.log({ ...this.#git, ref: MAIN, depth: limit });
    return entries.map(({ oid, commit }) => ({
      hash: oid,
      author: commit.author.name,
      date: new Date(commit.author.timestamp * 1000).toISOString(),
      message: commit.message.replace(/\n$/, ''),
      tags: (tagsOf.get(oid) ?? []).sort(),
    }));
  }

  /** A checkpoint's full hash from the (possibly short) one given, refusing what is not a commit of the scope. */
  async commitOf(hash: string): Promise<string> {
    try {
      const oid = hash.length === 40 ? hash : await this.#isogit.expandOid({ ...this.#git, oid: hash });
      await this.#isogit.readCommit({ ...this.#git, oid });
      return oid;
    } catch (error) {
      if (error instanceof this.#gitErrors.AmbiguousError)
        throw validationError([{ path: 'hash', message: `checkpoint ${hash} is ambiguous; give more of the hash` }]);
      if (error instanceof this.#gitErrors.NotFoundError || error instanceof this.#gitErrors.ObjectTypeError)
        throw new RpcError('NOT_FOUND', `Checkpoint ${hash} not found`);
      throw error;
    }
  }

  /** Writes the bytes waiting in `content` as blobs, a few files at a time. */
  async #writePendingBlobs(): Promise<void> {
    for (let after = ''; ;) {
      const rows = await this.#em.execute<{ path: string; work_oid: string; content: Uint8Array }[]>(
        `select path, work_oid, content from checkpoint_file where subscription_id = ? and scope = ? and content is not null and path collate "C" > ? order by path collate "C" limit ${BLOB_BATCH}`,
        [...this.#key, after],
      );
      for (const row of rows) {
        const blob = bytes(row.content);
        this.store.noteBlobSize(row.work_oid, blob.length);
        await this.#isogit.writeBlob({ ...this.#git, blob });
      }
      await this.store.flush();
      if (rows.length < BLOB_BATCH) return;
      after = rows.at(-1)!.path;
    }
  }

  /** Writes the trees of these files, folders first; answers the root tree's oid. */
  async #writeTree(files: Entry[]): Promise<string> {
    const here: { mode: string; path: string; oid: string; type: 'blob' | 'tree' }[] = [];
    const folders = new Map<string, Entry[]>();
    for (const file of files) {
      const slash = file.path.indexOf('/');
      if (slash < 0) here.push({ mode: '100644', path: file.path, oid: file.oid, type: 'blob' });
      else {
        const name = file.path.slice(0, slash);
        folders.set(name, [...(folders.get(name) ?? []), { path: file.path.slice(slash + 1), oid: file.oid }]);
      }
    }
    for (const [name, inside] of folders) here.push({ mode: '040000', path: name, oid: await this.#writeTree(inside), type: 'tree' });
    return this.#isogit.writeTree({ ...this.#git, tree: here });
  }

  /** Every file of a tree, with its path from the tree's root. */
  async #treeEntries(tree: string, prefix = ''): Promise<Entry[]> {
    const entries: Entry[] = [];
    for (const entry of (await this.#isogit.readTree({ ...this.#git, oid: tree })).tree) {
      if (entry.type === 'tree') entries.push(...(await this.#treeEntries(entry.oid, `${prefix}${entry.path}/`)));
      else if (entry.type === 'blob') entries.push({ path: `${prefix}${entry.path}`, oid: entry.oid });
    }
    return entries;
  }

  /** Blob sizes, from checkpoint_object, or read from the blob where the row does not hold it. */
  async #sizesOf(oids: string[]): Promise<Map<string, number>> {
    const sizes = new Map<string, number>();
    const wanted = [...new Set(oids)];
    for (let start = 0; start < wanted.length; start += BATCH) {
      const batch = wanted.slice(start, start + BATCH);
      const rows = await this.#em.execute<{ oid: string; size: number | null }[]>(
        `select oid, size from checkpoint_object where subscription_id = ? and scope = ? and oid in (${batch.map(() => '?').join(', ')})`,
        [...this.#key, ...batch],
      );
      for (const row of rows) if (row.size !== null) sizes.set(row.oid, row.size);
    }
    for (const oid of wanted) if (!sizes.has(oid)) sizes.set(oid, (await this.#isogit.readBlob({ ...this.#git, oid })).blob.length);
    return sizes;
  }

  /** The scope's files become those of its last checkpoint (none before the first). */
  async reset(): Promise<void> {
    const head = await this.store.ref(MAIN);
    await this.#resetFiles(head ? (await this.#isogit.readCommit({ ...this.#git, oid: head })).commit.tree : null);
  }

  /** The scope's files become those of a tree, all of them as the last checkpoint holds them. */
  async #resetFiles(tree: string | null): Promise<void> {
    const entries = tree ? await this.#treeEntries(tree) : [];
    const sizes = await this.#sizesOf(entries.map((entry) => entry.oid));
    await this.#em.execute('delete from checkpoint_file where subscription_id = ? and scope = ?', this.#key);
    for (let start = 0; start < entries.length; start += BATCH) {
      const batch = entries.slice(start, start + BATCH);
      await this.#em.execute(
        `insert into checkpoint_file (subscription_id, scope, path, head_oid, work_oid, size, content) values ${batch.map(() => '(?, ?, ?, ?, ?, ?, null)').join(', ')}`,
        batch.flatMap((entry) => [...this.#key, entry.path, entry.oid, entry.oid, sizes.get(entry.oid)!]),
      );
    }
  }

  /** A file's bytes at a commit, null when the commit has no such file. */
  async #blobAt(commit: string, filepath: string): Promise<Buffer | null> {
    try {
      return Buffer.from((await this.#isogit.readBlob({ ...this.#git, oid: commit, filepath })).blob);
    } catch (error) {
      if (error instanceof this.#gitErrors.NotFoundError || error instanceof this.#gitErrors.ObjectTypeError) return null;
      throw error;
    }
  }
}
