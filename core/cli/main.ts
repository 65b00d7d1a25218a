import { serve } from './serve.ts';

// `npm start` (see package.json): the service in the process npm spawns.
await serve({ printConfig: process.argv.includes('--print-config') });
