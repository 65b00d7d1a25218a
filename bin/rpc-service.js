#!/usr/bin/env node
// The package's command (`npx rpc-service`, see core/cli.ts). The service is
// TypeScript run through tsx's loader, registered here rather than with
// `node --import tsx`, so it resolves from this package wherever it is installed.
import { setFlagsFromString } from 'node:v8';
import { register } from 'tsx/esm/api';

// As `npm start` does with --liftoff-only (see docs/decisions.md): set before
// the embedded database's WebAssembly is compiled, it takes effect the same.
setFlagsFromString('--liftoff-only');
register();
await import('../core/cli.ts');
