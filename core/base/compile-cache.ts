import module from 'node:module';
import path from 'node:path';
import { CACHE_DIR } from './paths.ts';

/** Node 22.8 and later; absent on 20, where every start compiles the modules again. */
const enable = (module as { enableCompileCache?: (directory?: string) => { status: number } }).enableCompileCache;

/**
 * Keeps V8's compiled code of the modules this process loads after the call,
 * so that the next start reads it instead of parsing and compiling them again
 * (a third of the modules' load time: docs/decisions/0066-runtimes-and-start-up.md).
 * NODE_COMPILE_CACHE, when set, names the folder instead; a folder that cannot
 * be written only costs the cache. Called before the service's modules are imported.
 */
export function useCompileCache(): void {
  enable?.(process.env.NODE_COMPILE_CACHE ? undefined : path.join(CACHE_DIR, 'compile'));
}
