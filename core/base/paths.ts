import path from 'node:path';
import { fileURLToPath } from 'node:url';

/**
 * Where things are whether the service runs from its TypeScript sources
 * (tsx: development and tests) or from the JavaScript `npm run build` writes
 * to dist/js (`npm start`). Modules are built; everything else (assets, the
 * manifest, config files) stays only in the sources.
 */
const COMPILED = import.meta.url.endsWith('.js');
/** The package's folder. */
export const PACKAGE_ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), COMPILED ? '../../../..' : '../..');
/** npm's usual place for a package's caches: the embedded database's template (core/db/pglite.ts), compiled code (core/base/compile-cache.ts). */
export const CACHE_DIR = path.join(PACKAGE_ROOT, 'node_modules', '.cache', 'rpc-service');
/** Where the build writes the JavaScript (tsconfig.build.json). */
const BUILT_DIR = path.join(PACKAGE_ROOT, 'dist', 'js');

/** A file or folder kept beside a module's source (a folder of assets, a template): the same path whichever of the two runs. */
export function sourcePath(moduleUrl: string, relative: string): string {
  const resolved = fileURLToPath(new URL(relative, moduleUrl));
  const inBuilt = path.relative(BUILT_DIR, resolved);
  return inBuilt.startsWith('..') || path.isAbsolute(inBuilt) ? resolved : path.join(PACKAGE_ROOT, inBuilt) + (relative.endsWith('/') ? '/' : '');
}

/** A module beside another, as this process runs it (a worker thread's file): `.ts` in the sources, `.js` once built. */
export function modulePath(moduleUrl: string, relative: string): string {
  const resolved = fileURLToPath(new URL(relative, moduleUrl));
  return moduleUrl.endsWith('.js') ? resolved.replace(/\.ts$/, '.js') : resolved;
}

/** A module the built service cannot import by itself: a third-party or test plugin (or its worker) written in TypeScript. */
export const needsTypeScript = (file: string | undefined): boolean => COMPILED && file !== undefined && /\.[mc]?ts$/.test(file);

let typeScript: Promise<void> | undefined;

/** Registers tsx's loader in this thread before such a module is imported (once; nothing while the sources run under tsx). */
export function typeScriptReady(file: string | undefined): Promise<void> {
  if (!needsTypeScript(file)) return Promise.resolve();
  typeScript ??= import('tsx/esm/api').then(({ register }) => {
    register();
  });
  return typeScript;
}
