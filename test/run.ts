import { spawnSync } from 'node:child_process';
import { mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
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

// Tests that start the service as `npm start` does run the JavaScript of dist/js: built here when a source is newer.
const build = spawnSync(process.execPath, [path.join(root, '..', 'bin', 'build.js')], { stdio: 'inherit' });
if (build.status !== 0) process.exit(build.status ?? 1);

// Every test app on the embedded database starts from the template cluster: made here
// once, if missing, rather than by each test file at the same time.
if (!process.env.TEST_DATABASE_URL) await pgliteTemplate();

// The whole suite also logs every statement it sends, for the tenant-key check after it (test/tenant-keys/check.ts).
const whole = filters.length === 0;
const given = process.env.RPC_STATEMENT_LOG;
const statementLog = whole ? (given ?? mkdtempSync(path.join(tmpdir(), 'rpc-statements-'))) : undefined;
const env = statementLog ? { ...process.env, RPC_STATEMENT_LOG: statementLog } : process.env;

const result = spawnSync(process.execPath, ['--import', 'tsx', '--test', '--test-concurrency=2', '--test-reporter=spec', ...files], {
  stdio: 'inherit',
  cwd: path.dirname(root),
  env,
});
let status = result.status ?? 1;
if (statementLog) {
  const check = spawnSync(process.execPath, ['--import', 'tsx', path.join(root, 'tenant-keys', 'check.ts'), statementLog], {
    stdio: 'inherit',
    cwd: path.dirname(root),
  });
  if (check.status !== 0) status ||= check.status ?? 1;
  if (!given) rmSync(statementLog, { recursive: true, force: true });
}
process.exit(status);
