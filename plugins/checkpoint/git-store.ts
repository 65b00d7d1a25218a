import type { PromiseFsClient } from 'isomorphic-git';
import type { EntityManager } from 'rpc-service/plugin';

/**
 * A scope's git repository as isomorphic-git sees it: a file system holding
 * one bare repository at GITDIR, whose objects and refs are rows of
 * checkpoint_object and checkpoint_ref. isomorphic-git reads and writes
 * loose objects (`objects/ab/cdef…`, zlib-deflated) and ref files
 * (`refs/heads/main`), and this answers those paths from the tables. Writes
 * wait in memory until `flush`, in the transaction of the work: nothing of a
 * failed operation is kept, and a read after a write sees it.
 */

export const GITDIR = '/git';
export const MAIN = 'refs/heads/main';

/** What `git init --bare` writes; isomorphic-git reads it as it would the file. */
const CONFIG = '[core]\n\trepositoryformatversion = 0\n\tfilemode = false\n\tbare = true\n';
const OBJECT = /^\/git\/objects\/([0-9a-f]{2})\/([0-9a-f]{38})$/;
const FOLDERS = new Set([GITDIR, `${GITDIR}/objects`, `${GITDIR}/objects/pack`, `${GITDIR}/refs`, `${GITDIR}/refs/heads`, `${GITDIR}/refs/tags`]);

interface Stats {
  type: 'file' | 'dir';
  mode: number;
  size: number;
  ino: number;
  mtimeMs: number;
  ctimeMs: number;
  uid: number;
  gid: number;
  dev: number;
  isFile(): boolean;
  isDirectory(): boolean;
  isSymbolicLink(): boolean;
}

function stats(type: 'file' | 'dir', size = 0): Stats {
  return {
    type,
    mode: type === 'dir' ? 0o40755 : 0o100644,
    size,
    ino: 0,
    mtimeMs: 0,
    ctimeMs: 0,
    uid: 0,
    gid: 0,
    dev: 0,
    isFile: () => type === 'file',
    isDirectory: () => type === 'dir',
    isSymbolicLink: () => false,
  };
}

function missing(filepath: string): NodeJS.ErrnoException {
  return Object.assign(new Error(`ENOENT: no such file or directory, '${filepath}'`), { code: 'ENOENT' });
}

/** Bytes from a bytea column: the pg driver gives a Buffer, PGlite a Uint8Array. */
export const bytes = (value: Uint8Array): Buffer => (Buffer.isBuffer(value) ? value : Buffer.from(value.buffer, value.byteOffset, value.byteLength));

export class GitStore {
  readonly #em: EntityManager;
  readonly #key: [string, string];
  readonly #objects = new Map<string, { data: Buffer; size: number | null }>();
  /** Refs written (an oid) or deleted (null) since the last flush. */
  readonly #refs = new Map<string, string | null>();
  /** Blob sizes noted before isomorphic-git writes the blob, kept with it. */
  readonly #sizes = new Map<string, number>();

  /** The `fs` isomorphic-git is given, with GITDIR as `gitdir`. */
  readonly fs: PromiseFsClient;

  constructor(em: EntityManager, subscriptionId: string, scope: string) {
    this.#em = em;
    this.#key = [subscriptionId, scope];
    this.fs = {
      promises: {
        readFile: (filepath: string, options?: { encoding?: BufferEncoding } | BufferEncoding) => this.#readFile(filepath, options),
        writeFile: (filepath: string, data: Uint8Array | string) => this.#writeFile(filepath, data),
        unlink: (filepath: string) => this.#unlink(filepath),
        readdir: (filepath: string) => this.#readdir(filepath),
        stat: (filepath: string) => this.#stat(filepath),
        lstat: (filepath: string) => this.#stat(filepath),
        mkdir: async () => undefined,
        rmdir: async () => undefined,
        readlink: async (filepath: string) => Promise.reject(missing(filepath)),
        symlink: async (filepath: string) => Promise.reject(missing(filepath)),
      },
    };
  }

  /** Records the size of a blob about to be written, for listFiles at a checkpoint. */
  noteBlobSize(oid: string, size: number): void {
    this.#sizes.set(oid, size);
  }

  /** A ref's oid, or null. */
  async ref(name: string): Promise<string | null> {
    if (this.#refs.has(name)) return this.#refs.get(name)!;
    const [row] = await this.#em.execute<{ oid: string }[]>('select oid from checkpoint_ref where subscription_id = ? and scope = ? and name = ?', [
      ...this.#key,
      name,
    ]);
    return row?.oid ?? null;
  }

  /** Writes what the work wrote: objects first, then refs. */
  async flush(): Promise<void> {
    const objects = [...this.#objects];
    for (let start = 0; start < objects.length; start += 100) {
      const batch = objects.slice(start, start + 100);
      await this.#em.execute(
        `insert into checkpoint_object (subscription_id, scope, oid, size, data) values ${batch.map(() => '(?, ?, ?, ?, ?)').join(', ')} on conflict do nothing`,
        batch.flatMap(([oid, { data, size }]) => [...this.#key, oid, size, data]),
      );
    }
    this.#objects.clear();
    for (const [name, oid] of this.#refs) {
      if (oid === null) await this.#em.execute('delete from checkpoint_ref where subscription_id = ? and scope = ? and name = ?', [...this.#key, name]);
      else
        await this.#em.execute(
          'insert into checkpoint_ref (subscription_id, scope, name, oid) values (?, ?, ?, ?) on conflict (subscription_id, scope, name) do update set oid = excluded.oid',
          [...this.#key, name, oid],
        );
    }
    this.#refs.clear();
  }

  async #readFile(filepath: string, options?: { encoding?: BufferEncoding } | BufferEncoding): Promise<Buffer | string> {
    const encoding = typeof options === 'string' ? options : options?.encoding;
    const data = await this.#contentOf(filepath);
    if (data === null) throw missing(filepath);
    return encoding ? data.toString(encoding) : data;
  }

  async #contentOf(filepath: string): Promise<Buffer | null> {
    if (filepath === `${GITDIR}/HEAD`) return Buffer.from(`ref: ${MAIN}\n`);
    if (filepath === `${GITDIR}/config`) return Buffer.from(CONFIG);
    const object = OBJECT.exec(filepath);
    if (object) return this.object(object[1]! + object[2]!);
    if (filepath.startsWith(`${GITDIR}/refs/`)) {
      const oid = await this.ref(filepath.slice(GITDIR.length + 1));
      return oid ? Buffer.from(`${oid}\n`) : null;
    }
    return null;
  }

  /** An object as git keeps it loose (deflated), or null. */
  async object(oid: string): Promise<Buffer | null> {
    const pending = this.#objects.get(oid);
    if (pending) return pending.data;
    const [row] = await this.#em.execute<{ data: Uint8Array }[]>('select data from checkpoint_object where subscription_id = ? and scope = ? and oid = ?', [
      ...this.#key,
      oid,
    ]);
    return row ? bytes(row.data) : null;
  }

  async #writeFile(filepath: string, data: Uint8Array | string): Promise<void> {
    const object = OBJECT.exec(filepath);
    if (object) {
      const oid = object[1]! + object[2]!;
      this.#objects.set(oid, { data: Buffer.from(data), size: this.#sizes.get(oid) ?? null });
      return;
    }
    if (filepath.startsWith(`${GITDIR}/refs/`)) {
      this.#refs.set(filepath.slice(GITDIR.length + 1), String(data).trim());
      return;
    }
    // isomorphic-git writes nothing else for the functions the scope uses (plugins/checkpoint/repository.ts); anything more is a defect to see.
    throw new Error(`The checkpoint store keeps no ${filepath}`);
  }

  async #unlink(filepath: string): Promise<void> {
    if (!filepath.startsWith(`${GITDIR}/refs/`)) throw missing(filepath);
    this.#refs.set(filepath.slice(GITDIR.length + 1), null);
  }

  async #stat(filepath: string): Promise<Stats> {
    if (FOLDERS.has(filepath) || /^\/git\/objects\/[0-9a-f]{2}$/.test(filepath)) return stats('dir');
    // isomorphic-git asks whether an object exists only before writing it; the write's insert skips one that does, without a query first.
    const object = OBJECT.exec(filepath);
    if (object) {
      const pending = this.#objects.get(object[1]! + object[2]!);
      if (!pending) throw missing(filepath);
      return stats('file', pending.data.length);
    }
    const data = await this.#contentOf(filepath);
    if (data === null) throw missing(filepath);
    return stats('file', data.length);
  }

  /** The one folder isomorphic-git lists here: an object folder, to expand a short hash (refs are read by their names, tags listed by SQL). */
  async #readdir(filepath: string): Promise<string[]> {
    const folder = /^\/git\/objects\/([0-9a-f]{2})$/.exec(filepath);
    if (folder) {
      const prefix = folder[1]!;
      const rows = await this.#em.execute<{ oid: string }[]>(
        'select oid from checkpoint_object where subscription_id = ? and scope = ? and starts_with(oid, ?)',
        [...this.#key, prefix],
      );
      const oids = new Set([...rows.map((row) => row.oid), ...[...this.#objects.keys()].filter((oid) => oid.startsWith(prefix))]);
      return [...oids].map((oid) => oid.slice(2));
    }
    if (FOLDERS.has(filepath)) return [];
    throw missing(filepath);
  }
}
