import assert from 'node:assert/strict';
import { mkdirSync, mkdtempSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { after, describe, it } from 'node:test';
import { fileURLToPath } from 'node:url';
import semver from 'semver';
import type { PluginErrorCode } from '../../core/base/plugin-errors.ts';
import { PluginLoadError } from '../../core/plugin/loader.ts';
import { CORE_VERSION } from '../../core/base/version.ts';
import { startTestApp } from '../support/harness.ts';
import { freePort, killLeftoverProcesses, runServer } from '../support/process.ts';

/**
 * The mistakes a plugin author usually makes, each in a real plugin package
 * named in PLUGINS: start-up stops with a coded error that says what to fix.
 */
const ROOT = fileURLToPath(new URL('../..', import.meta.url));
const MAJOR = semver.major(CORE_VERSION);

const dirs: string[] = [];
after(() => {
  killLeftoverProcesses();
  for (const dir of dirs) rmSync(dir, { recursive: true, force: true });
});

function tempDir(): string {
  const dir = mkdtempSync(path.join(tmpdir(), 'rpc-plugin-author-'));
  dirs.push(dir);
  return dir;
}

interface PluginSource {
  id: string;
  group: string;
  coreVersion?: string;
  /** The table of the one entity the plugin declares, if any. */
  table?: string;
}

/** Writes a plugin package as an author publishes it (ESM, the SDK and valibot imported by name) into `folder`; returns the folder. */
function writePlugin(folder: string, { id, group, coreVersion = `^${MAJOR}.0.0`, table }: PluginSource): string {
  mkdirSync(folder, { recursive: true });
  const manifest = { name: id, version: '1.0.0', type: 'module', main: 'index.js', peerDependencies: { 'rpc-service': `^${MAJOR}` } };
  writeFileSync(path.join(folder, 'package.json'), JSON.stringify(manifest, null, 2));
  const entity = table
    ? `const Greeting = defineEntity({ name: 'Greeting', tableName: ${JSON.stringify(table)}, properties: (p) => ({ id: p.uuid().primary() }) });\n`
    : '';
  const fields = [`id: '${id}'`, `group: '${group}'`, `coreVersion: '${coreVersion}'`, 'operations: { ping }', ...(table ? ['entities: [Greeting]'] : [])];
  writeFileSync(
    path.join(folder, 'index.js'),
    `import { defineEntity, definePlugin, operationBuilder } from 'rpc-service/plugin';\n` +
      `import * as v from 'valibot';\n\n` +
      `const defineOperation = operationBuilder();\n` +
      `const ping = defineOperation({ access: 'user', describe: 'Answers pong.', params: v.object({}), handler: () => 'pong' });\n` +
      entity +
      `export const plugin = definePlugin({ ${fields.join(', ')} });\n`,
  );
  return folder;
}

/**
 * An installation folder as `npm install rpc-service <plugin>` leaves it: the
 * service (this repository) and the plugin's own dependency beside the plugin
 * in one node_modules. Returns the plugin's folder.
 */
function installed(source: PluginSource): string {
  const modules = path.join(tempDir(), 'node_modules');
  mkdirSync(modules);
  symlinkSync(ROOT, path.join(modules, 'rpc-service'), 'dir');
  symlinkSync(path.join(ROOT, 'node_modules/valibot'), path.join(modules, 'valibot'), 'dir');
  return writePlugin(path.join(modules, source.id), source);
}

/** Asserts that the service does not start with PLUGINS set to `plugins`, refusing with this code and a message containing each of `says`. */
async function refusesToStart(plugins: string, code: PluginErrorCode, says: string[]): Promise<string> {
  let message = '';
  await assert.rejects(startTestApp({ env: { PLUGINS: plugins } }), (error: unknown) => {
    assert.ok(error instanceof PluginLoadError, String(error));
    assert.equal(error.code, code, error.message);
    for (const text of says) assert.ok(error.message.includes(text), `"${error.message}" should say ${text}`);
    message = error.message;
    return true;
  });
  return message;
}

describe('plugin packages an author gets wrong', () => {
  it('loads a well-formed plugin package from an installation folder, as the messages below advise', async () => {
    const t = await startTestApp({ env: { PLUGINS: installed({ id: 'hello', group: 'HelloRpc', table: 'hello_greeting' }) } });
    try {
      const account = await t.signup();
      assert.equal(await t.ok('HelloRpc.ping', {}, { token: account.token }), 'pong');
    } finally {
      await t.close();
    }
  });

  it('says to install the service beside a plugin that cannot resolve rpc-service, and to declare the peer dependency', async () => {
    const plugin = writePlugin(path.join(tempDir(), 'hello'), { id: 'hello', group: 'HelloRpc' });
    await refusesToStart(plugin, 'PLUGIN_SDK_UNRESOLVED', [
      `"${plugin}" named in PLUGINS`,
      `${path.join(plugin, 'index.js')} imports the SDK, rpc-service`,
      'npm pack in the plugin folder, then npm install <tarball>',
      `"peerDependencies": {"rpc-service": "^${MAJOR}.0.0"}`,
    ]);
  });

  it('refuses a plugin that would bring a second copy of the SDK (its own development install), before importing it', async () => {
    const folder = writePlugin(path.join(tempDir(), 'hello'), { id: 'hello', group: 'HelloRpc' });
    // As `npm install` in the plugin's folder leaves it: rpc-service among its devDependencies. Importing this copy would throw.
    const copy = path.join(folder, 'node_modules', 'rpc-service');
    mkdirSync(copy, { recursive: true });
    writeFileSync(
      path.join(copy, 'package.json'),
      JSON.stringify({ name: 'rpc-service', version: CORE_VERSION, exports: { './plugin': './broken.js', './package.json': './package.json' } }),
    );
    writeFileSync(path.join(copy, 'broken.js'), "throw new Error('the second copy was imported');\n");
    await refusesToStart(folder, 'PLUGIN_SDK_COPY', [
      `resolves rpc-service from ${copy}, not the running service's ${ROOT.replace(/\/$/, '')}`,
      'npm install <tarball>',
    ]);
  });

  it('says to install a plugin named by a package that is not installed', async () => {
    await refusesToStart('hello-plugin-not-installed', 'PLUGIN_IMPORT_FAILED', ['install it beside the service: npm install hello-plugin-not-installed']);
    await refusesToStart('@acme/not-installed/extra', 'PLUGIN_IMPORT_FAILED', ['npm install @acme/not-installed']);
  });

  it('names the coreVersion range and this core, and says to update the service or change the range', async () => {
    const next = `^${MAJOR + 1}.0.0`;
    await refusesToStart(installed({ id: 'hello', group: 'HelloRpc', coreVersion: next }), 'PLUGIN_CORE_VERSION', [
      `needs core version "${next}", but this core is ${CORE_VERSION}`,
      `update the service to a version in "${next}"`,
      `or change the plugin's coreVersion to a range containing ${CORE_VERSION}, e.g. "^${MAJOR}.0.0"`,
      'and its peer dependency on rpc-service to the same',
    ]);
    await refusesToStart(installed({ id: 'hello', group: 'HelloRpc', coreVersion: 'latest' }), 'PLUGIN_CORE_VERSION', [
      'coreVersion "latest" is not a valid semver range',
      `a range containing ${CORE_VERSION}`,
    ]);
  });

  it('says an id or a group is taken by a built-in plugin, and to pick another', async () => {
    await refusesToStart(installed({ id: 'auth', group: 'HelloRpc' }), 'PLUGIN_DUPLICATE_ID', ['taken by the built-in plugin "auth"', 'pick another id']);
    await refusesToStart(installed({ id: 'hello', group: 'TaskRpc' }), 'PLUGIN_DUPLICATE_GROUP', [
      'group TaskRpc is taken by the built-in plugin "task"',
      'pick another group',
    ]);
    // Two third-party packages with one id: neither is built in.
    const twice = await refusesToStart(
      [installed({ id: 'twin', group: 'FirstRpc' }), installed({ id: 'twin', group: 'SecondRpc' })].join(','),
      'PLUGIN_DUPLICATE_ID',
      ['"twin" is loaded twice'],
    );
    assert.ok(!twice.includes('built-in'), twice);
  });

  it('names the entity, its table and the rule for table names', async () => {
    await refusesToStart(installed({ id: 'hello-world', group: 'HelloRpc', table: 'greetings' }), 'PLUGIN_TABLE_PREFIX', [
      'entity Greeting',
      'table "greetings" must be "hello_world" or start with "hello_world_"',
      'its id "hello-world", with - turned into _',
    ]);
  });

  it('stops the server process with one line naming the fix when the SDK does not resolve', async () => {
    const plugin = writePlugin(path.join(tempDir(), 'hello'), { id: 'hello', group: 'HelloRpc' });
    const server = runServer({ PLUGINS: plugin, DATA_DIR: tempDir(), HOST: '127.0.0.1', PORT: String(await freePort()), LOG_LEVEL: 'info', WORKERS: '1' });
    const { code } = await server.exited(60_000);
    assert.equal(code, 1, server.stderr());
    assert.match(server.stderr(), /^Cannot start: Cannot import plugin package ".*" named in PLUGINS: /);
    assert.ok(server.stderr().includes('npm install <tarball>'), server.stderr());
  });
});
