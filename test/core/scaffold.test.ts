import assert from 'node:assert/strict';
import { mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, symlinkSync, writeFileSync, type Dirent } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { fileURLToPath } from 'node:url';
import { newPlugin } from '../../core/scaffold/new-plugin.ts';
import { startTestApp, type TestApp } from '../support/harness.ts';
import { runInProject } from '../support/process.ts';

/**
 * `rpc-service plugin new`: what it writes, and that the plugin it writes
 * loads and answers. The whole path an author takes (npm install, tsc and the
 * package's own tests in its own folder, a packed installation) is
 * test/e2e/plugin-package.test.ts.
 */
const ROOT = fileURLToPath(new URL('../..', import.meta.url));

/** Every file under a folder, relative to it. */
const filesOf = (folder: string): string[] =>
  (readdirSync(folder, { recursive: true, withFileTypes: true }) as Dirent[])
    .filter((entry) => entry.isFile())
    .map((entry) => path.relative(folder, path.join(entry.parentPath, entry.name)))
    .sort();

describe('rpc-service plugin new', () => {
  const work = mkdtempSync(path.join(tmpdir(), 'rpc-scaffold-'));
  const dir = path.join(work, 'task-board-plugin');
  let t: TestApp;

  before(async () => {
    await newPlugin(dir, { group: 'TaskBoardRpc' });
    // Installed beside the service, the package resolves rpc-service and valibot from node_modules; links stand in for npm here.
    mkdirSync(path.join(dir, 'node_modules'));
    symlinkSync(ROOT, path.join(dir, 'node_modules', 'rpc-service'), 'dir');
    symlinkSync(path.join(ROOT, 'node_modules', 'valibot'), path.join(dir, 'node_modules', 'valibot'), 'dir');
    t = await startTestApp({ withNotes: false, env: { PLUGINS: dir, TASK_BOARD_MAX_ITEMS: '1' }, plugins: ['task-board', 'auth'] });
  });
  after(async () => {
    await t?.close();
    rmSync(work, { recursive: true, force: true });
  });

  it('writes a package named after its folder, its id, tables and settings after the group, every placeholder filled', () => {
    const files = filesOf(dir).filter((file) => !file.startsWith('node_modules'));
    const migration = files.find((file) => /^migrations\/Migration\d{14}_initial\.ts$/.test(file));
    assert.ok(migration, files.join(', '));
    assert.deepEqual(
      files.filter((file) => file !== migration),
      [
        '.gitignore',
        'README.md',
        'config.ts',
        'index.ts',
        'item.entity.ts',
        'migrations/.snapshot.json',
        'migrations/index.ts',
        'package.json',
        'test/plugin.test.ts',
        'tsconfig.json',
      ],
    );
    for (const file of files) assert.doesNotMatch(readFileSync(path.join(dir, file), 'utf8'), /\{\{\w+\}\}/, `${file} keeps a placeholder`);
    const manifest = JSON.parse(readFileSync(path.join(dir, 'package.json'), 'utf8'));
    assert.equal(manifest.name, 'task-board-plugin');
    assert.deepEqual(manifest.peerDependencies, { 'rpc-service': '^2.0.0' });
    // The package that wrote it, linked by npm: its tests and types are those of the service it was made with.
    assert.equal(manifest.devDependencies['rpc-service'], `file:${path.resolve(ROOT)}`);
    const index = readFileSync(path.join(dir, 'index.ts'), 'utf8');
    assert.match(index, /id: 'task-board'/);
    assert.match(index, /group: 'TaskBoardRpc'/);
    assert.match(index, /export const taskBoardPlugin = /);
    assert.match(readFileSync(path.join(dir, migration!), 'utf8'), /create table "task_board_item"/);
    assert.match(readFileSync(path.join(dir, migration!), 'utf8'), /import \{ Migration \} from 'rpc-service\/plugin';/);
  });

  it('loads into the service: its migration ran, its operations answer, its setting and error code work', async () => {
    const owner = await t.signup();
    const added = await t.ok('TaskBoardRpc.add', { text: ' first ' }, { token: owner.token });
    assert.equal(added.text, 'first');
    assert.deepEqual(
      (await t.ok<{ _id: string }[]>('TaskBoardRpc.list', {}, { token: owner.token })).map((item) => item._id),
      [added._id],
    );
    const full = await t.call('TaskBoardRpc.add', { text: 'second' }, { token: owner.token });
    assert.equal(full.status, 409);
    assert.equal(full.body.data.code, 'TASK_BOARD_LIMIT_REACHED');
    assert.match(full.body.data.error, /TASK_BOARD_MAX_ITEMS/);
  });

  it('refuses a bad group, id or name, one a built-in plugin has, and a folder that is not empty, saying what to change', async () => {
    await assert.rejects(newPlugin(path.join(work, 'a'), { group: 'Hello' }), /--group "Hello" must look like "HelloRpc"/);
    await assert.rejects(newPlugin(path.join(work, 'b'), { group: 'HelloRpc', id: 'Hello_World' }), /plugin id "Hello_World" must be kebab-case/);
    await assert.rejects(newPlugin(path.join(work, 'Bad Name'), { group: 'HelloRpc' }), /"Bad Name" is not a valid npm package name/);
    await assert.rejects(
      newPlugin(path.join(work, 'd'), { group: 'TaskRpc', id: 'my-tasks' }),
      /the group TaskRpc belongs to the built-in plugin "task"; choose another/,
    );
    await assert.rejects(newPlugin(path.join(work, 'e'), { group: 'HelloRpc', id: 'memory' }), /the plugin id "memory" is taken by a built-in plugin/);
    mkdirSync(path.join(work, 'taken'));
    writeFileSync(path.join(work, 'taken', 'keep.txt'), 'mine');
    await assert.rejects(newPlugin(path.join(work, 'taken'), { group: 'HelloRpc' }), /exists and is not empty/);
    assert.deepEqual(readdirSync(path.join(work, 'taken')), ['keep.txt']);
  });

  it('as a command, answers a mistake with one line on stderr and exit code 1', async () => {
    const cli = runInProject(process.execPath, ['bin/rpc-service.js', 'plugin', 'new', path.join(work, 'c'), '--group', 'nope'], {});
    const { code } = await cli.exited(30_000);
    assert.equal(code, 1);
    assert.equal(cli.stderr().trim(), 'Cannot write the plugin: --group "nope" must look like "HelloRpc": PascalCase, ending in Rpc');
  });
});
