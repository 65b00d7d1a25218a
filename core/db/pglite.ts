import { chmodSync, cpSync, existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, renameSync, rmdirSync, rmSync } from 'node:fs';
import { createRequire } from 'node:module';
import path from 'node:path';
import { Worker } from 'node:worker_threads';
import { PGlite, types } from '@electric-sql/pglite';
import { vector } from '@electric-sql/pglite/vector';
import { CACHE_DIR } from '../base/paths.ts';

/**
 * PGlite's own start parameters with two changes. Its `-F` turns fsync off;
 * without it a write acknowledged is a write on disk, as with PostgreSQL. And
 * the buffer cache is 16 MB instead of PostgreSQL's 128 MB: PGlite holds the
 * whole cache in its WASM memory from the start, most of an idle service's
 * memory, while the operating system caches the data files anyway.
 */
export const PGLITE_START_PARAMS = [...PGlite.defaultStartParams.filter((param) => param !== '-F'), '-c', 'shared_buffers=16MB'];

const PGLITE_ENTRY = createRequire(import.meta.url).resolve('@electric-sql/pglite');
// The version installed (its package.json is not exported, so read from beside its entry point).
const PGLITE_VERSION: string = JSON.parse(readFileSync(path.join(path.dirname(PGLITE_ENTRY), '..', 'package.json'), 'utf8')).version;
/** A new database cluster as PGlite's initdb leaves it: a folder to copy for a new data dir, and its tarball for one in memory. */
const TEMPLATE_DIR = path.join(CACHE_DIR, `pglite-${PGLITE_VERSION}`);
const TEMPLATE_TARBALL = `${TEMPLATE_DIR}.tar.gz`;

/**
 * Opens the embedded database: `dataDir` on disk, or in memory when undefined.
 * A new database starts as a copy of the template cluster rather than by
 * PGlite's initdb, which takes three times as long and leaves the process
 * holding several hundred megabytes of WASM memory it never gives back.
 */
export async function openPglite(dataDir: string | undefined): Promise<PGlite> {
  const isNew = dataDir === undefined || readdirSync(dataDir).length === 0;
  const template = isNew ? await pgliteTemplate() : null;
  let loadDataDir: Blob | undefined;
  if (template && dataDir === undefined) loadDataDir = template.tarball();
  else if (template && dataDir !== undefined) copyTemplate(template.dir, dataDir);
  const pglite = new PGlite({
    dataDir: dataDir ?? 'memory://',
    extensions: { vector },
    startParams: PGLITE_START_PARAMS,
    ...(loadDataDir ? { loadDataDir } : {}),
  });
  await pglite.waitReady;
  await leanParsers(pglite);
  return pglite;
}

/** Object ids below this are PostgreSQL's own, the same in every database; extensions and schemas get higher ones. */
const FIRST_NORMAL_OBJECT_ID = 16384;

/**
 * PGlite 0.4 copies an instance's parsers into a new object for every result
 * it reads, and it holds one for each array type (over 300): the copy took
 * half the time of a short query. Where a result's type has no parser there,
 * it looks in its module's defaults, so the parsers of the built-in array
 * types go there instead (their ids are the same in every database, and
 * their elements' parsers are the defaults), and the instance keeps the base
 * types' and those of types made in this database (pgvector's).
 */
async function leanParsers(pglite: PGlite): Promise<void> {
  const arrays = await pglite.query<{ element: number; array: number }>(
    `select distinct b.oid::int as element, b.typarray::int as array
     from pg_catalog.pg_type a join pg_catalog.pg_type b on b.oid = a.typelem
     where a.typcategory = 'A' and b.typarray < ${FIRST_NORMAL_OBJECT_ID}`,
  );
  for (const { element, array } of arrays.rows) {
    types.parsers[array] ??= (value: string) => types.arrayParser(value, types.parsers[element], array);
    delete pglite.parsers[array];
  }
}

interface Template {
  dir: string;
  tarball(): Blob;
}

let template: Promise<Template | null> | undefined;

/** The template cluster, made by initdb the first time; null where it cannot be kept (a read-only installation), and each database runs initdb. */
export function pgliteTemplate(): Promise<Template | null> {
  template ??= makeTemplate().catch((error: Error) => {
    process.emitWarning(`No template for new embedded databases (${error.message}): each runs PostgreSQL's initdb, slower and with more memory`);
    return null;
  });
  return template;
}

const isTemplate = () => existsSync(TEMPLATE_TARBALL) && existsSync(path.join(TEMPLATE_DIR, 'PG_VERSION'));

async function makeTemplate(): Promise<Template> {
  if (!isTemplate()) {
    // Made under temporary names and renamed, so processes starting together never see half a template.
    mkdirSync(CACHE_DIR, { recursive: true });
    const work = mkdtempSync(path.join(CACHE_DIR, 'initdb-'));
    try {
      await initdbInWorker(work);
      // Readable by every user: installed by one (root, in an image) and run by another.
      chmodTree(work);
      renameSync(`${work}.tar.gz`, TEMPLATE_TARBALL);
      // A folder left by an initdb cut short; a whole one may be in use by another process.
      if (existsSync(TEMPLATE_DIR) && !existsSync(path.join(TEMPLATE_DIR, 'PG_VERSION'))) rmSync(TEMPLATE_DIR, { recursive: true, force: true });
      try {
        renameSync(work, TEMPLATE_DIR);
      } catch (error) {
        // Another process starting at the same time put its template there first.
        if (!isTemplate()) throw error;
      }
    } finally {
      rmSync(work, { recursive: true, force: true });
      rmSync(`${work}.tar.gz`, { force: true });
    }
  }
  let tarball: Blob | undefined;
  return { dir: TEMPLATE_DIR, tarball: () => (tarball ??= new Blob([new Uint8Array(readFileSync(TEMPLATE_TARBALL))])) };
}

/**
 * initdb grows PGlite's WASM memory to several hundred megabytes, which a
 * process never gets back; in a worker thread it is all freed when the worker ends.
 */
const INITDB = `
const { workerData: { pglite, dataDir, startParams } } = require('node:worker_threads');
const { writeFileSync } = require('node:fs');
const { PGlite } = require(pglite);
(async () => {
  const db = new PGlite({ dataDir, startParams });
  try {
    const tarball = await db.dumpDataDir('gzip');
    writeFileSync(dataDir + '.tar.gz', Buffer.from(await tarball.arrayBuffer()));
  } finally {
    await db.close();
  }
})();
`;

function initdbInWorker(dataDir: string): Promise<void> {
  const worker = new Worker(INITDB, { eval: true, workerData: { pglite: PGLITE_ENTRY, dataDir, startParams: PGLITE_START_PARAMS } });
  return new Promise((resolve, reject) => {
    worker.once('error', reject);
    worker.once('exit', (code) => (code === 0 ? resolve() : reject(new Error(`initdb of the template cluster ended with code ${code}`))));
  });
}

function chmodTree(folder: string): void {
  chmodSync(folder, 0o755);
  for (const entry of readdirSync(folder, { withFileTypes: true })) {
    const entryPath = path.join(folder, entry.name);
    if (entry.isDirectory()) chmodTree(entryPath);
    else chmodSync(entryPath, 0o644);
  }
}

/**
 * Copied beside the data dir and renamed into place, so a start cut short never
 * leaves half a cluster that looks whole; copies such a start left are removed.
 * The data dir is private to the user again, as makeDataFolder made it.
 */
function copyTemplate(templateDir: string, dataDir: string): void {
  const parent = path.dirname(dataDir);
  const partialPrefix = `${path.basename(dataDir)}.new-`;
  for (const left of readdirSync(parent).filter((name) => name.startsWith(partialPrefix))) {
    rmSync(path.join(parent, left), { recursive: true, force: true });
  }
  const partial = path.join(parent, `${partialPrefix}${process.pid}`);
  cpSync(templateDir, partial, { recursive: true });
  chmodSync(partial, 0o700);
  rmdirSync(dataDir);
  renameSync(partial, dataDir);
}
