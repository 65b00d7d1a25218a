import { spawnSync } from 'node:child_process';
import { readdirSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { pgliteTemplate } from '../core/db/pglite.ts';

/**
 * `npm test`: every *.test.ts under test/ through node's test runner. Extra
 * arguments narrow the run to files whose path contains one of them.
 */
const root = fileURLToPath(new URL('.', import.meta.url));
const filters = process.argv.slice(2);
const files = (readdirSync(root, { recursive: true }) as string[])
  .filter((file) => file.endsWith('.test.ts') && !file.startsWith('bench'))
  .map((file) => path.join('test', file))
  .filter((file) => filters.length === 0 || filters.some((filter) => file.includes(filter)))
  .sort();

// Every test app on the embedded database starts from the template cluster: made here
// once, if missing, rather than by each test file at the same time.
if (!process.env.TEST_DATABASE_URL) await pgliteTemplate();

const result = spawnSync(process.execPath, ['--import', 'tsx', '--test', '--test-concurrency=2', '--test-reporter=spec', ...files], {
  stdio: 'inherit',
  cwd: path.dirname(root),
});
process.exit(result.status ?? 1);
