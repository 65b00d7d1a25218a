#!/usr/bin/env -S node --conditions=rpc-service-compiled --max-semi-space-size=16
// The package's command (`npx rpc-service`, see core/cli/cli.ts). Started through
// this line, node resolves `rpc-service/plugin` (what plugins import) to the
// built SDK, and the command runs the JavaScript of dist/js, built first when
// a source is newer (bin/build.js). Started otherwise (`node bin/rpc-service.js`)
// it runs the TypeScript sources through tsx's loader, as in development.
import { setFlagsFromString } from 'node:v8';

// As `npm start` does with --liftoff-only (see docs/decisions/0038-the-service-as-a-package.md): set before
// the embedded database's WebAssembly is compiled, it takes effect the same.
setFlagsFromString('--liftoff-only');
if (import.meta.resolve('rpc-service/plugin').endsWith('.js')) {
  const { buildIfStale } = await import('./build.js');
  try {
    buildIfStale();
  } catch (error) {
    console.error(error.message);
    process.exit(1);
  }
  const { useCompileCache } = await import('../dist/js/core/base/compile-cache.js');
  useCompileCache();
  await import('../dist/js/core/cli/cli.js');
} else {
  const { register } = await import('tsx/esm/api');
  register();
  await import('../core/cli/cli.ts');
}
