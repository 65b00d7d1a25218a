import { cpSync, existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, renameSync, rmdirSync, rmSync } from 'node:fs';
import { createRequire } from 'node:module';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { Worker } from 'node:worker_threads';
import { PGlite } from '@electric-sql/pglite';
import { vector } from '@electric-sql/pglite/vector';

/**
 * PGlite's own start parameters with two changes. Its `-F` turns fsync off;
 * without it a write acknowledged is a write on disk, as with PostgreSQL. And
 * the buffer cache is 16 MB instead of PostgreSQL's 128 MB: PGlite holds the
 * whole cache in its WASM memory from the start, most of an idle service's
 * memory, while the operating system caches the data files anyway.
 */
export const PGLITE_START_PARAMS = [...PGlite.defaultStartParams.filter((param) => param !== '-F'), '-c', 'shared_buffers=16MB'];

const ROOT = fileURLToPath(new URL('../../', import.meta.url));
const PGLITE_VERSION: string = JSON.parse(readFileSync(path.join(ROOT, 'package.json'), 'utf8')).dependencies['@electric-sql/pglite'];
/** npm's usual place for a package's caches. */
const CACHE_DIR = path.join(ROOT, 'node_modules', '.cache', 'rpc-service');
/** A new database cluster as PGlite's initdb leaves it: a folder to copy for a new data dir, and its tarball for one in memory. */
export const TEMPLATE_DIR = path.join(CACHE_DIR, `pglite-${PGLITE_VERSION}`);
const TEMPLATE_TARBALL = `${TEMPLATE_DIR}.tar.gz`;

/**
 * Opens the embedded database: `dataDir` on disk, or in memory when undefined.
 * A new database starts as a copy of the template cluster rather than by
 * PGlite's initdb, which takes three times as long and leaves the process
 * holding several hundred megabytes of WASM memory it never gives back.
 */
export async function openPglite(dataDir: string | undefined): Promise<PGlite> {
  const template = await pgliteTemplate();
  let loadDataDir: Blob | undefined;
  if (template && dataDir === undefined) loadDataDir = template.tarball();
  else if (template && dataDir !== undefined && isEmptyFolder(dataDir)) copyTemplate(template.dir, dataDir);
  const pglite = new PGlite({
    dataDir: dataDir ?? 'memory://',
    extensions: { vector },
    startParams: PGLITE_START_PARAMS,
    ...(loadDataDir ? { loadDataDir } : {}),
  });
  await pglite.waitReady;
  return pglite;
}

interface Template {
  dir: string;
  tarball(): Blob;
}

let template: Promise<Template | null> | undefined;

/** The template cluster, made by initdb the first time; null where it cannot be kept (a read-only installation), and each database runs initdb. */
export function pgliteTemplate(): Promise<Template | null> {
  template ??= makeTemplate().catch(() => null);
  return template;
}

async function makeTemplate(): Promise<Template> {
  if (!existsSync(TEMPLATE_TARBALL) || !existsSync(path.join(TEMPLATE_DIR, 'PG_VERSION'))) {
    // Made under temporary names and renamed, so processes starting together never see half a template.
    mkdirSync(CACHE_DIR, { recursive: true });
    const work = mkdtempSync(path.join(CACHE_DIR, 'initdb-'));
    try {
      await initdbInWorker(work);
      renameSync(`${work}.tar.gz`, TEMPLATE_TARBALL);
      if (!existsSync(TEMPLATE_DIR)) renameSync(work, TEMPLATE_DIR);
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
  const pglite = createRequire(import.meta.url).resolve('@electric-sql/pglite');
  const worker = new Worker(INITDB, { eval: true, workerData: { pglite, dataDir, startParams: PGLITE_START_PARAMS } });
  return new Promise((resolve, reject) => {
    worker.once('error', reject);
    worker.once('exit', (code) => (code === 0 ? resolve() : reject(new Error(`initdb of the template cluster ended with code ${code}`))));
  });
}

const isEmptyFolder = (folder: string) => readdirSync(folder).length === 0;

/** Copied beside the data dir and renamed into place, so a start cut short never leaves half a cluster that looks whole. */
function copyTemplate(templateDir: string, dataDir: string): void {
  const partial = `${dataDir}.new-${process.pid}`;
  rmSync(partial, { recursive: true, force: true });
  cpSync(templateDir, partial, { recursive: true });
  rmdirSync(dataDir);
  renameSync(partial, dataDir);
}
