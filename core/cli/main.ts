import { useCompileCache } from '../base/compile-cache.ts';

// `npm start` (see package.json): the service in the process npm spawns. The modules are imported once the cache of their
// compiled code is on.
useCompileCache();
const { serve } = await import('./serve.ts');
await serve({ printConfig: process.argv.includes('--print-config') });
