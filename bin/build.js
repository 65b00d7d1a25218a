#!/usr/bin/env node
// Builds dist/js, the JavaScript the service runs (`npm start`, `rpc-service`),
// from the TypeScript sources when one is newer than the last build. Run on
// install, before `npm start` and before the tests; a packed package carries
// its build, so it never builds there (nor needs TypeScript).
import { spawnSync } from 'node:child_process';
import { existsSync, readdirSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import path from 'node:path';

const ROOT = path.resolve(import.meta.dirname, '..');
const BUILT = path.join(ROOT, 'dist', 'js');
const STAMP = path.join(BUILT, '.built');
const SOURCES = ['core', 'plugins', 'workers', 'config'];
const CONFIG = path.join(ROOT, 'tsconfig.build.json');

/** A plugin's tests (`plugins/<id>/test/`): not built (tsconfig.build.json), nor shipped (package.json "files"). */
const isPluginTest = (folder) => {
  const [top, , sub] = path.relative(ROOT, folder).split(path.sep);
  return top === 'plugins' && sub === 'test';
};

/** The newest modification time of the sources and the build's settings. */
function newestSource() {
  let newest = Math.max(...['tsconfig.json', 'tsconfig.build.json', 'package.json'].map((file) => statSync(path.join(ROOT, file)).mtimeMs));
  for (const folder of SOURCES) {
    for (const entry of readdirSync(path.join(ROOT, folder), { recursive: true, withFileTypes: true })) {
      if (entry.isFile() && entry.name.endsWith('.ts') && !isPluginTest(entry.parentPath)) {
        newest = Math.max(newest, statSync(path.join(entry.parentPath, entry.name)).mtimeMs);
      }
    }
  }
  return newest;
}

export function buildIfStale() {
  // A packed package holds its build and not the build's settings: it runs what it was packed with.
  if (!existsSync(CONFIG)) {
    if (existsSync(STAMP)) return;
    throw new Error('Cannot start: dist/js is missing and this folder holds no tsconfig.build.json to build it from');
  }
  if (existsSync(STAMP) && statSync(STAMP).mtimeMs >= newestSource()) return;
  let tsc;
  try {
    tsc = createRequire(import.meta.url).resolve('typescript/bin/tsc');
  } catch {
    throw new Error('Cannot build dist/js: TypeScript is not installed (it is a devDependency: run npm install in the clone)');
  }
  rmSync(BUILT, { recursive: true, force: true });
  const built = spawnSync(process.execPath, [tsc, '-p', CONFIG], { stdio: 'inherit' });
  if (built.status !== 0) throw new Error(`Cannot build dist/js: tsc exited with ${built.status ?? built.signal}`);
  writeFileSync(STAMP, `${new Date().toISOString()}\n`);
}

if (process.argv[1] === import.meta.filename) {
  try {
    buildIfStale();
  } catch (error) {
    console.error(error.message);
    process.exit(1);
  }
}
