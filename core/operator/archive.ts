import { createHash } from 'node:crypto';
import { createReadStream, createWriteStream, existsSync, readdirSync, statSync, type Dirent } from 'node:fs';
import { mkdtemp, readFile, rename, rm, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { Transform } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import * as tar from 'tar';
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

/** The file's SHA-256; `read` hears of each chunk's bytes, for a progress bar. */
async function sha256(file: string, read: (bytes: number) => void = () => undefined): Promise<string> {
  const hash = createHash('sha256');
  for await (const chunk of createReadStream(file) as AsyncIterable<Buffer>) {
    hash.update(chunk);
    read(chunk.length);
  }
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
    const reading = new Set<tar.WriteEntry>();
    const onWriteEntry = (entry: tar.WriteEntry) => {
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
    await pipeline(
      tar.create({ gzip: true, cwd: this.folder, portable: true, onWriteEntry }, ['manifest.json', ...this.entries.map((entry) => entry.path)]),
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

/**
 * Unpacks `from` into `into` and answers its manifest once `accept` took it
 * (format, kind) and every entry matched: a missing or altered entry, or a
 * file the manifest does not list, is refused. Progress: the archive's bytes
 * unpacked, then the entries' bytes checked.
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
  report({ label: 'unpacking', done: 0, total: size, unit: 'bytes' });
  await pipeline(
    createReadStream(from),
    counter((done) => report({ label: 'unpacking', done, total: size, unit: 'bytes' })),
    tar.extract({ cwd: into, strict: true }),
  ).catch((error: Error) => {
    throw new OperatorError(`${from} is not ${what}: ${error.message}`);
  });
  let manifest: M;
  try {
    manifest = JSON.parse(await readFile(path.join(into, 'manifest.json'), 'utf8')) as M;
  } catch {
    throw new OperatorError(`${from} has no readable manifest.json: it is not ${what}`);
  }
  accept(manifest);
  const listed = new Set(manifest.entries.map((entry) => entry.path));
  const unlisted = filesUnder(into).filter((file) => file !== 'manifest.json' && !listed.has(file));
  if (unlisted.length > 0) throw new OperatorError(`${from} holds files its manifest does not list (${unlisted.slice(0, 3).join(', ')}): it was altered`);
  const total = manifest.entries.reduce((sum, entry) => sum + entry.size, 0);
  let checked = 0;
  report({ label: 'checking', done: 0, total, unit: 'bytes' });
  for (const entry of manifest.entries) {
    const file = path.join(into, entry.path);
    const read = (bytes: number) => report({ label: 'checking', done: (checked += bytes), total, unit: 'bytes' });
    if (!existsSync(file) || statSync(file).size !== entry.size || (await sha256(file, read)) !== entry.sha256) {
      throw new OperatorError(`${from}: ${entry.path} does not match its checksum: the archive is damaged or was altered`);
    }
  }
  return manifest;
}
