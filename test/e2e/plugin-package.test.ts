import assert from 'node:assert/strict';
import { existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { fileURLToPath } from 'node:url';
import { createScratchDatabase, databaseEnv, type ScratchDatabase, TEST_DATABASE_URL } from '../support/database.ts';
import { TEST_MASTER_KEY } from '../support/harness.ts';
import { freePort, killLeftoverProcesses, runIn, whenHealthy, type RunningProcess } from '../support/process.ts';
import { dataOf, type Envelope } from '../support/wire.ts';
import type { ApiKeyRpcCreateResult, AuthRpcSignupResult } from '../../clients/typescript/src/operations.ts';

/**
 * docs/plugin-sdk.md's plugin author walk-through, command by command, in a new
 * folder outside the repository: this repository packed, an installation
 * made from the tarball, a plugin scaffolded there, type-checked and tested in
 * its own folder, packed, installed into the installation and served with an
 * API key calling its operation. npm installs from the registry (or its cache).
 */
const ROOT = fileURLToPath(new URL('../..', import.meta.url));
const VERSION: string = JSON.parse(readFileSync(path.join(ROOT, 'package.json'), 'utf8')).version;
const STEP_MS = 240_000;

describe('a third-party plugin package, from the scaffold to an installation', { timeout: 15 * 60_000 }, () => {
  const work = mkdtempSync(path.join(tmpdir(), 'rpc-walkthrough-'));
  const installation = path.join(work, 'my-backend');
  const plugin = path.join(work, 'hello-plugin');
  const tarball = `rpc-service-${VERSION}.tgz`;
  // On PostgreSQL, one database for the plugin's own tests and one for the installation, which must start on an empty one.
  const databases: ScratchDatabase[] = [];
  const installationEnv = (which: 0 | 1): Record<string, string> =>
    databases[which] ? { ...databaseEnv(databases[which].url), MASTER_KEY: TEST_MASTER_KEY } : {};

  /** Runs a command as the author types it, in a folder; insists on exit code 0 and returns its output. */
  async function run(cwd: string, command: string, args: string[], env: Record<string, string> = {}): Promise<string> {
    const started = Date.now();
    const child = runIn(cwd, command, args, env);
    const { code } = await child.exited(STEP_MS);
    const output = `${child.stdout()}\n${child.stderr()}`;
    assert.equal(code, 0, `${command} ${args.join(' ')} in ${cwd} ended with ${code}:\n${output}`);
    console.log(
      `# ${cwd === ROOT ? 'rpc-service' : path.relative(work, cwd)}$ ${command} ${args.join(' ')}  (${((Date.now() - started) / 1000).toFixed(1)} s)`,
    );
    return output;
  }

  before(async () => {
    if (TEST_DATABASE_URL) databases.push(await createScratchDatabase(TEST_DATABASE_URL), await createScratchDatabase(TEST_DATABASE_URL));
  });
  after(async () => {
    killLeftoverProcesses();
    for (const database of databases) await database.drop();
    rmSync(work, { recursive: true, force: true });
  });

  it('packs the service with its type declarations and API reference', async () => {
    await run(ROOT, 'npm', ['pack', '--pack-destination', work]);
    assert.ok(existsSync(path.join(work, tarball)), `${tarball} in ${readdirSync(work).join(', ')}`);
  });

  it('installs the package into a new installation folder, its postinstall included', async () => {
    mkdirSync(installation);
    await run(installation, 'npm', ['init', '-y']);
    await run(installation, 'npm', ['pkg', 'set', 'scripts.start=exec rpc-service serve']);
    await run(installation, 'npm', ['install', '--prefer-offline', `../${tarball}`]);
    // npm 11 runs a dependency's install script once the project approves it; npm 10 ran it already.
    const npmMajor = Number((await run(installation, 'npm', ['--version'])).trim().split('.')[0]);
    if (npmMajor >= 11) {
      await run(installation, 'npm', ['install-scripts', 'approve', 'rpc-service']);
      await run(installation, 'npm', ['rebuild', 'rpc-service']);
    }
    const cache = path.join(installation, 'node_modules', 'rpc-service', 'node_modules', '.cache', 'rpc-service');
    assert.ok(existsSync(cache) && readdirSync(cache).some((file) => file.endsWith('.tar.gz')), 'the postinstall made the embedded database template');
    assert.match(await run(installation, 'npx', ['rpc-service', '--version']), new RegExp(VERSION.replaceAll('.', '\\.')));
  });

  it('scaffolds a plugin that type-checks and passes its own tests in its own folder, and makes its next migration', async () => {
    await run(installation, 'npx', ['rpc-service', 'plugin', 'new', '../hello-plugin', '--group', 'HelloRpc']);
    const manifest = JSON.parse(readFileSync(path.join(plugin, 'package.json'), 'utf8'));
    assert.equal(manifest.peerDependencies['rpc-service'], `^${VERSION.split('.')[0]}.0.0`);
    assert.ok(readdirSync(path.join(plugin, 'migrations')).some((file) => /^Migration\d{14}_initial\.ts$/.test(file)));
    await run(plugin, 'npm', ['install', '--prefer-offline']);
    await run(plugin, 'npx', ['tsc']);
    const tests = await run(plugin, 'npm', ['test'], installationEnv(0));
    // node --test's summary: `# pass 4` from its TAP reporter (the default without a terminal on Node 20 and 22), `ℹ pass 4` from the spec one (24).
    assert.match(tests, /^(?:#|ℹ) pass [1-9]/m);
    assert.match(tests, /^(?:#|ℹ) fail 0$/m);
    // An author's next change: a column, then the package's own migration command.
    const entity = path.join(plugin, 'item.entity.ts');
    writeFileSync(entity, readFileSync(entity, 'utf8').replace('text: p.text(),', 'text: p.text(),\n    note: p.text().nullable(),'));
    assert.match(await run(plugin, 'npm', ['run', 'migration:create', '--', 'add_note']), /Wrote migrations\/Migration\d{14}_add_note\.ts/);
    const next = readdirSync(path.join(plugin, 'migrations')).find((file) => file.endsWith('_add_note.ts'))!;
    assert.match(readFileSync(path.join(plugin, 'migrations', next), 'utf8'), /alter table "hello_item" add column "note" text null/);
    await run(plugin, 'npx', ['tsc']);
    await run(plugin, 'npm', ['pack']);
  });

  it('packs a plugin written in plain JavaScript, with no build step', async () => {
    const folder = path.join(work, 'hello-js');
    mkdirSync(folder);
    const manifest = {
      name: 'hello-js',
      version: '1.0.0',
      type: 'module',
      main: 'index.js',
      peerDependencies: { 'rpc-service': '^2' },
      dependencies: { valibot: '^1.5.0' },
    };
    writeFileSync(path.join(folder, 'package.json'), JSON.stringify(manifest, null, 2));
    writeFileSync(
      path.join(folder, 'index.js'),
      [
        "import * as v from 'valibot';",
        "import { definePlugin, operationBuilder } from 'rpc-service/plugin';",
        'const defineOperation = operationBuilder();',
        'export const helloJs = definePlugin({',
        "  id: 'hello-js', group: 'HelloJsRpc', coreVersion: '^2.0.0',",
        "  operations: { ping: defineOperation({ access: 'user', describe: 'Answers pong.', params: v.object({}), handler: () => 'pong' }) },",
        '});',
        '',
      ].join('\n'),
    );
    await run(folder, 'npm', ['pack']);
  });

  it('loads the packed plugins into the installation: their settings listed, the migration run, their operations answering an API key', async () => {
    await run(installation, 'npm', ['install', '--prefer-offline', '../hello-plugin/hello-plugin-0.1.0.tgz', '../hello-js/hello-js-1.0.0.tgz']);
    const port = await freePort();
    // The installation's settings in its .env, as docs/operations.md lays the folder out.
    const settings = { PLUGINS: 'hello-plugin,hello-js', PORT: String(port), ...installationEnv(1) };
    writeFileSync(
      path.join(installation, '.env'),
      Object.entries(settings)
        .map(([name, value]) => `${name}=${value}\n`)
        .join(''),
    );
    const config = await run(installation, 'npx', ['rpc-service', 'serve', '--print-config']);
    assert.match(config, /^HELLO_MAX_ITEMS\s+hello\s+default 1000\s/m);

    const server: RunningProcess = runIn(installation, 'npx', ['rpc-service', 'serve'], {});
    const base = `http://127.0.0.1:${port}`;
    await whenHealthy(server, base, 60_000);
    assert.match(server.stdout(), /"hello:Migration\d{14}_initial","hello:Migration\d{14}_add_note"/, 'the plugin migrations ran at start');
    const call = async <T = unknown>(method: string, params: unknown, headers: Record<string, string> = {}) => {
      const response = await fetch(`${base}/api/rpc`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', ...headers },
        body: JSON.stringify({ method, params }),
      });
      return { status: response.status, body: (await response.json()) as Envelope<T> };
    };
    const signup = await call<AuthRpcSignupResult>('AuthRpc.signup', { email: 'author@example.com', username: 'author', password: 'correct horse battery' });
    assert.equal(signup.status, 200, JSON.stringify(signup.body));
    const key = await call<ApiKeyRpcCreateResult>(
      'ApiKeyRpc.create',
      { description: 'walk-through' },
      { authorization: `Bearer ${dataOf(signup.body).token}` },
    );
    const { fullKey } = dataOf(key.body);
    // The package's own plugin: its operations are unknown to the generated client.
    const added = await call<{ text: string }>('HelloRpc.add', { text: 'hello from a package' }, { 'x-api-key': fullKey });
    assert.equal(added.status, 200, JSON.stringify(added.body));
    assert.equal(dataOf(added.body).text, 'hello from a package');
    const listed = await call<{ text: string }[]>('HelloRpc.list', {}, { 'x-api-key': fullKey });
    assert.deepEqual(
      dataOf(listed.body).map((item) => item.text),
      ['hello from a package'],
    );
    assert.deepEqual((await call('HelloJsRpc.ping', {}, { 'x-api-key': fullKey })).body, { success: true, data: 'pong' });
    // Ctrl-C in a terminal: SIGINT to npx and the service, which stops cleanly.
    process.kill(-server.child.pid!, 'SIGINT');
    await server.exited(30_000);
    assert.match(server.stdout(), /"signal":"SIGINT","msg":"shutting down"/);
    if (!TEST_DATABASE_URL)
      assert.ok(existsSync(path.join(installation, 'data', 'db')), 'the embedded database lives in the installation folder (DATA_DIR=./data)');
  });
});
