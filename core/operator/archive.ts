import { createHash } from 'node:crypto';
import { createReadStream, createWriteStream, existsSync, mkdirSync, readdirSync, statSync, type Dirent } from 'node:fs';
import { mkdtemp, rename, rm, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { Transform } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import type { ReadEntry, WriteEntry } from 'tar';
import { migrations as coreMigrations } from '../db/migrations/index.ts';
import type { Database } from '../db/orm.ts';
import { MIGRATIONS_TABLE, type NamedMigration } from '../db/migration.ts';
import type { Plugin } from '../plugin/define.ts';
import { OperatorError, type Report } from './command.ts';

/**
 * The archives of `backup` and `tenant export`: a gzipped tar whose
 * `manifest.json` lists every other entry with its size and SHA-256, built in
 * a staging folder and checked whole, before anything is used, when read.
 */
export interface ArchiveEntry {
  path: string;
  size: number;
  sha256: string;
}

export interface ArchiveManifest {
  format: number;
  serviceVersion: string;
  entries: ArchiveEntry[];
}

/** The file's SHA-256. */
async function sha256(file: string): Promise<string> {
  const hash = createHash('sha256');
  for await (const chunk of createReadStream(file) as AsyncIterable<Buffer>) hash.update(chunk);
  return hash.digest('hex');
}

/** Passes a stream's chunks on, telling `seen` how many bytes have passed so far. */
function counter(seen: (bytes: number) => void): Transform {
  let bytes = 0;
  return new Transform({
    transform(chunk: Buffer, _encoding, done) {
      seen((bytes += chunk.length));
      done(null, chunk);
    },
  });
}

const objectsLast = (entry: Dirent): number => (entry.isDirectory() && entry.name === 'objects' ? 1 : 0);

/**
 * The files under `root` by their path in it, leaving out uploads still
 * arriving (`.part`, core/uploads/storage.ts) and the top-level names `skip`
 * refuses. In a git repository `objects/` comes after the refs beside it, so
 * a copy made while commits land holds every object the copied refs name.
 */
export function filesUnder(root: string, skip: (name: string) => boolean = () => false, relative = ''): string[] {
  const here = path.join(root, relative);
  if (!existsSync(here)) return [];
  const entries = readdirSync(here, { withFileTypes: true }).sort((a, b) => objectsLast(a) - objectsLast(b) || a.name.localeCompare(b.name));
  return entries.flatMap((entry) => {
    const child = path.join(relative, entry.name);
    if (relative === '' && skip(entry.name)) return [];
    if (entry.isDirectory()) return filesUnder(root, skip, child);
    return entry.isFile() && !entry.name.endsWith('.part') ? [child] : [];
  });
}

/** Every migration of the core and of the given plugins, named as the database records them (`<owner>:<class name>`). */
export const migrationsOf = (plugins: readonly Plugin[]): NamedMigration[] =>
  [{ id: 'core', migrations: coreMigrations }, ...plugins].flatMap(({ id, migrations = [] }) =>
    migrations.map((migration) => ({ name: `${id}:${migration.name}`, migration })),
  );

/** The migrations the database has applied, in order. */
export async function appliedMigrations(db: Database): Promise<string[]> {
  return (await db.execute<{ name: string }>(`select name from "${MIGRATIONS_TABLE}" order by id`)).map((row) => row.name);
}

/** A staging folder beside the archive to be: entries go in, then `pack` writes the archive (0600: it may hold keys). */
export class Staging {
  readonly entries: ArchiveEntry[] = [];

  private constructor(readonly folder: string) {}

  /** A staging folder beside `out`, so the archive is renamed into place on the same file system. */
  static async open(out: string): Promise<Staging> {
    const folder = path.dirname(out);
    if (!existsSync(folder) || !statSync(folder).isDirectory()) throw new OperatorError(`${folder} is not a folder: write the archive into an existing one`);
    return new Staging(await mkdtemp(path.join(folder, '.staging-')));
  }

  /** Where an entry is written before `add` records it. */
  path(relative: string): string {
    return path.join(this.folder, relative);
  }

  /** Records an entry written into the staging folder: its size and checksum. */
  async add(relative: string): Promise<ArchiveEntry> {
    const file = this.path(relative);
    const entry = { path: relative, size: statSync(file).size, sha256: await sha256(file) };
    this.entries.push(entry);
    return entry;
  }

  /**
   * Writes the manifest, then the archive under a temporary name renamed into
   * place once whole. Its progress is the bytes of the files read into it: those
   * done, and as far as tar has read the ones it is on.
   */
  async pack(out: string, manifest: ArchiveManifest, report: Report): Promise<void> {
    const listing = JSON.stringify(manifest, null, 2);
    await writeFile(this.path('manifest.json'), listing);
    const total = Buffer.byteLength(listing) + this.entries.reduce((sum, entry) => sum + entry.size, 0);
    let packed = 0;
    const reading = new Set<WriteEntry>();
    const onWriteEntry = (entry: WriteEntry) => {
      reading.add(entry);
      entry.once('end', () => {
        reading.delete(entry);
        packed += entry.stat?.size ?? 0;
      });
    };
    // A file's `pos` is set once tar opens it.
    const done = () => [...reading].reduce((sum, entry) => sum + Math.min((entry.pos as number | undefined) ?? 0, entry.stat?.size ?? 0), packed);
    report({ label: 'packing', done: 0, total, unit: 'bytes' });
    const partial = `${out}.partial`;
    // tar is imported here, not with the module: the serving process holds the operator commands (core/cli/serve.ts) and rarely packs.
    const { create } = await import('tar');
    await pipeline(
      create({ gzip: true, cwd: this.folder, portable: true, onWriteEntry }, ['manifest.json', ...this.entries.map((entry) => entry.path)]),
      counter(() => report({ label: 'packing', done: Math.min(done(), total), total, unit: 'bytes' })),
      createWriteStream(partial, { mode: 0o600 }),
    );
    report({ label: 'packing', done: total, total, unit: 'bytes' });
    await rename(partial, out);
  }

  close(): Promise<void> {
    return rm(this.folder, { recursive: true, force: true });
  }
}

/** The largest manifest.json read: it is held in memory, and about a million entries fit. */
const MANIFEST_LIMIT = 256 * 1024 * 1024;
const SHA256 = /^[0-9a-f]{64}$/;

/** A relative POSIX path of plain parts: not absolute, no empty, `.` or `..` part. */
export function isPlainPath(relative: string): boolean {
  return relative.length > 0 && !relative.includes('\0') && relative.split('/').every((part) => part !== '' && part !== '.' && part !== '..');
}

/**
 * Where `relative`, a path an archive names, lies in `root`: refused unless it
 * is a plain path that resolves inside `root`. Every file an archive puts in
 * place is placed through here.
 */
export function inside(root: string, relative: string): string {
  const target = path.resolve(root, relative);
  const within = path.relative(path.resolve(root), target);
  if (!isPlainPath(relative) || within === '' || within.startsWith('..') || path.isAbsolute(within)) {
    throw new OperatorError(`${JSON.stringify(relative)} is not a path inside ${root}: the archive was altered`);
  }
  return target;
}

/** Why the manifest's entries are not a listing of files: each a plain path, listed once, with a size and a SHA-256, none inside another. */
function entriesProblem(entries: unknown): string | undefined {
  if (!Array.isArray(entries)) return 'its manifest lists no entries';
  const files = new Set<string>();
  const folders = new Set<string>();
  for (const entry of entries as (Partial<ArchiveEntry> | null)[]) {
    const { path: name, size, sha256: sum } = entry ?? {};
    if (typeof name !== 'string' || name === 'manifest.json' || !isPlainPath(name))
      return `its manifest lists an entry ${JSON.stringify(name)}, not a path inside the archive`;
    if (typeof size !== 'number' || !Number.isSafeInteger(size) || size < 0 || typeof sum !== 'string' || !SHA256.test(sum)) {
      return `its manifest gives ${name} no size and SHA-256`;
    }
    if (files.has(name)) return `its manifest lists ${name} twice`;
    files.add(name);
    const parts = name.split('/');
    for (let depth = 1; depth < parts.length; depth++) folders.add(parts.slice(0, depth).join('/'));
  }
  const both = [...files].find((name) => folders.has(name));
  return both === undefined ? undefined : `its manifest lists ${both} as a file and as a folder`;
}

/**
 * Unpacks `from` into `into` (a new, empty folder) and answers its manifest.
 * The archive is checked as it is read: its first member is manifest.json,
 * taken by `accept` (format, kind) and checked (each entry a plain path, once)
 * before any other member is written; each member after it must be a regular
 * file the manifest lists, of the size it gives, and is hashed as it is
 * written. The first thing out of place stops the reading there, so nothing
 * beyond what the manifest announces reaches the disk: a member it does not
 * list (or a second time), a link, a folder or a device, a size not its own,
 * a checksum that does not match; then an entry it lists that never came.
 * Every write has ended when it answers or throws, so the caller may remove
 * `into` whole. Progress: the archive's bytes read.
 */
export async function unpackChecked<M extends ArchiveManifest>(
  from: string,
  into: string,
  what: string,
  accept: (manifest: M) => void,
  report: Report,
): Promise<M> {
  if (!existsSync(from)) throw new OperatorError(`${from} does not exist`);
  const size = statSync(from).size;
  let manifest: M | undefined;
  let listed = new Map<string, ArchiveEntry>();
  let members = 0;
  const written = new Set<string>();
  const writes: Promise<void>[] = [];
  const stop = new AbortController();
  let refusal: Error | undefined;
  const { Parser } = await import('tar');
  const parser = new Parser({ strict: true });
  const refuse = (error: unknown): void => {
    refusal ??= error instanceof OperatorError ? error : new OperatorError(`${from} is not ${what}: ${(error as Error).message}`);
    stop.abort(refusal);
    parser.abort(refusal);
  };
  const altered = (why: string) => new OperatorError(`${from} ${why}: it is not ${what}, or it was altered`);

  /** The first member: the manifest, read whole (it is small) and checked before the next member is read (the parser waits for its end). */
  const readManifest = (member: ReadEntry): void => {
    if (member.path !== 'manifest.json' || member.type !== 'File' || member.size > MANIFEST_LIMIT) {
      throw new OperatorError(`${from} has no readable manifest.json: it is not ${what}`);
    }
    const chunks: Buffer[] = [];
    member.on('data', (chunk: Buffer) => chunks.push(chunk));
    member.on('end', () => {
      try {
        let read: unknown;
        try {
          read = JSON.parse(Buffer.concat(chunks).toString('utf8'));
        } catch {
          read = undefined;
        }
        if (read === null || typeof read !== 'object' || Array.isArray(read))
          throw new OperatorError(`${from} has no readable manifest.json: it is not ${what}`);
        accept(read as M);
        const problem = entriesProblem((read as M).entries);
        if (problem) throw altered(problem);
        listed = new Map((read as M).entries.map((entry) => [entry.path, entry]));
        manifest = read as M;
      } catch (error) {
        refuse(error);
      }
    });
  };

  /** Any later member: a file the manifest lists, written where it says, hashed on the way; a byte beyond its size stops it. */
  const unpackMember = (member: ReadEntry): void => {
    const entry = listed.get(member.path);
    if (!entry || written.has(member.path)) throw altered(`holds ${member.path}, which its manifest does not list${entry ? ' twice' : ''}`);
    if (member.type !== 'File' && member.type !== 'OldFile') throw altered(`holds ${member.path} as a ${member.type}, not a file`);
    if (member.size !== entry.size) throw altered(`holds ${member.path} of ${member.size} bytes where its manifest says ${entry.size}`);
    written.add(member.path);
    const file = inside(into, member.path);
    mkdirSync(path.dirname(file), { recursive: true, mode: 0o700 });
    const hash = createHash('sha256');
    let bytes = 0;
    const damaged = () => new OperatorError(`${from}: ${entry.path} does not match its checksum: the archive is damaged or was altered`);
    const checked = new Transform({
      transform(chunk: Buffer, _encoding, done) {
        bytes += chunk.length;
        if (bytes > entry.size) return done(damaged());
        hash.update(chunk);
        done(null, chunk);
      },
      flush(done) {
        done(bytes === entry.size && hash.digest('hex') === entry.sha256 ? null : damaged());
      },
    });
    writes.push(pipeline(member, checked, createWriteStream(file, { flags: 'wx', mode: 0o600 }), { signal: stop.signal }).catch(refuse));
  };

  parser.on('entry', (member: ReadEntry) => {
    try {
      if (refusal) member.resume();
      else if (members++ === 0) readManifest(member);
      else if (!manifest) member.resume();
      else unpackMember(member);
    } catch (error) {
      member.resume();
      refuse(error);
    }
  });
  report({ label: 'unpacking', done: 0, total: size, unit: 'bytes' });
  await pipeline(
    createReadStream(from),
    counter((done) => report({ label: 'unpacking', done, total: size, unit: 'bytes' })),
    parser,
  ).catch((error: Error) => refuse(error));
  if (refusal) stop.abort(refusal);
  await Promise.all(writes);
  if (refusal) throw refusal;
  if (!manifest) throw new OperatorError(`${from} has no readable manifest.json: it is not ${what}`);
  const missing = [...listed.keys()].filter((name) => !written.has(name));
  if (missing.length > 0) throw altered(`lacks ${missing.slice(0, 3).join(', ')}, which its manifest lists`);
  return manifest;
}
