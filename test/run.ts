import { spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { pgliteTemplate } from '../core/db/pglite.ts';

/**
 * `npm test`: every *.test.ts under test/ (the core's, end-to-end and the example plugin's) and under each
 * plugin's test/ folder, through node's test runner. Extra arguments narrow the run to files whose path
 * (from the repository's root, `plugins/memory/test/memory.test.ts`) contains one of them.
 */
const root = fileURLToPath(new URL('.', import.meta.url));
const repository = path.dirname(root);
const testsUnder = (folder: string): string[] =>
  (readdirSync(path.join(repository, folder), { recursive: true }) as string[])
    .filter((file) => file.endsWith('.test.ts'))
    .map((file) => path.join(folder, file));
const pluginTestFolders = readdirSync(path.join(repository, 'plugins'), { withFileTypes: true })
  .filter((entry) => entry.isDirectory() && existsSync(path.join(repository, 'plugins', entry.name, 'test')))
  .map((entry) => path.join('plugins', entry.name, 'test'));
const filters = process.argv.slice(2);
const files = [...testsUnder('test').filter((file) => !file.startsWith(path.join('test', 'bench'))), ...pluginTestFolders.flatMap(testsUnder)]
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
  cwd: repository,
  env,
});
let status = result.status ?? 1;
if (statementLog) {
  const check = spawnSync(process.execPath, ['--import', 'tsx', path.join(root, 'tenant-keys', 'check.ts'), statementLog], {
    stdio: 'inherit',
    cwd: repository,
  });
  if (check.status !== 0) status ||= check.status ?? 1;
  if (!given) rmSync(statementLog, { recursive: true, force: true });
}
process.exit(status);
