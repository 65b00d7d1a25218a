import assert from 'node:assert/strict';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { EntitySchema } from '@mikro-orm/core';
import { asValue } from 'awilix';
import semver from 'semver';
import * as v from 'valibot';
import { definePlugin, type Plugin, type PluginDefinition } from '../../core/plugin/define.ts';
import { importPackagePlugins, PluginLoadError, validatePlugins } from '../../core/plugin/loader.ts';
import { defineOperation, type Operation } from '../../core/rpc/operation.ts';
import { CORE_VERSION } from '../../core/version.ts';
import { NOTES_PLUGIN, startTestApp, uniqueName, type TestApp } from '../support/harness.ts';

const ROOT = fileURLToPath(new URL('../..', import.meta.url));
const escape = (text: string) => text.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');

const userOp = defineOperation({ access: 'user', describe: 'A harmless operation.', params: v.object({}), handler: () => 'pong' });

const plugin = (overrides: Partial<PluginDefinition> = {}): Plugin =>
  definePlugin({ id: 'mine', group: 'MineRpc', coreVersion: '^1.0.0', operations: { ping: userOp }, ...overrides });

/** Asserts that validatePlugins refuses with a PluginLoadError whose message matches. */
function refuses(plugins: Plugin[], message: RegExp): void {
  assert.throws(
    () => validatePlugins(plugins),
    (error: unknown) => {
      assert.ok(error instanceof PluginLoadError, `expected a PluginLoadError, got ${String(error)}`);
      assert.match(error.message, message);
      return true;
    },
  );
}

describe('validatePlugins', () => {
  it('accepts a well-formed plugin and returns it', () => {
    const good = plugin();
    assert.deepEqual(validatePlugins([good]), [good]);
  });

  it('refuses an operation outside the plugin group, naming the operation and the group', () => {
    refuses(
      [plugin({ operations: { ping: userOp, 'OtherRpc.steal': userOp } })],
      /Plugin "mine" \(group MineRpc\) declares operation "OtherRpc\.steal" outside its own group; a plugin may only register MineRpc\.\* operations/,
    );
    // The plugin's own group written out in full is fine.
    assert.equal(validatePlugins([plugin({ operations: { 'MineRpc.ping': userOp } })]).length, 1);
  });

  it('refuses duplicate plugin ids', () => {
    refuses([plugin({ id: 'dup', group: 'FirstRpc' }), plugin({ id: 'dup', group: 'SecondRpc' })], /Plugin "dup" is loaded twice; plugin ids must be unique/);
  });

  it('refuses two plugins with one group', () => {
    refuses(
      [plugin({ id: 'first', group: 'SameRpc' }), plugin({ id: 'second', group: 'SameRpc' })],
      /Plugin "second": group SameRpc already belongs to plugin "first"/,
    );
  });

  it('refuses an id that is not kebab-case', () => {
    for (const id of ['TaskBoard', 'task_board', 'task--board', '-task', 'task-', '1task', '']) {
      refuses([plugin({ id })], new RegExp(`Plugin id "${escape(id)}" must be kebab-case`));
    }
    assert.equal(validatePlugins([plugin({ id: 'task-board2' })]).length, 1);
  });

  it('refuses a group name that does not look like <Name>Rpc', () => {
    for (const group of ['Task', 'taskRpc', 'TaskRPC', 'Task-Rpc', 'Rpc', '']) {
      refuses([plugin({ group })], new RegExp(`Plugin "mine": group "${escape(group)}" must look like "TaskRpc"`));
    }
  });

  it('refuses a core version range this core does not satisfy', () => {
    const next = `^${semver.major(CORE_VERSION) + 1}.0.0`;
    const older = `<${CORE_VERSION}`;
    for (const range of [next, older, 'not a range']) {
      refuses(
        [plugin({ coreVersion: range })],
        new RegExp(`Plugin "mine" needs core version "${escape(range)}", but this core is ${escape(CORE_VERSION)}`),
      );
    }
    for (const range of [`^${CORE_VERSION}`, `>=${CORE_VERSION}`, `${semver.major(CORE_VERSION)}.x`]) {
      assert.equal(validatePlugins([plugin({ coreVersion: range })]).length, 1, range);
    }
  });

  it('refuses a missing dependency', () => {
    refuses([plugin({ id: 'needy', dependsOn: ['ghost'] })], /Plugin "needy" depends on "ghost", which is not loaded/);
  });

  it('refuses a dependency cycle, naming its members', () => {
    refuses(
      [plugin({ id: 'alpha', group: 'AlphaRpc', dependsOn: ['beta'] }), plugin({ id: 'beta', group: 'BetaRpc', dependsOn: ['alpha'] })],
      /Plugins depend on each other in a cycle: alpha → beta → alpha/,
    );
    refuses([plugin({ id: 'selfish', dependsOn: ['selfish'] })], /cycle: selfish → selfish/);
  });

  it('refuses a public operation outside AuthRpc', () => {
    const open = defineOperation({ access: 'public', describe: 'Anyone may call this.', params: v.object({}), handler: () => 1 });
    refuses([plugin({ operations: { open } })], /Plugin "mine" \(group MineRpc\): operation "open" cannot be public; only AuthRpc operations are/);
    // The same operation is fine under AuthRpc.
    assert.equal(validatePlugins([plugin({ id: 'auth-extra', group: 'AuthRpc', operations: { open } })]).length, 1);
  });

  it('refuses an operation not made with defineOperation', () => {
    const raw = { access: 'user', describe: 'Hand-made.', params: v.object({}), handler: () => 1 } as unknown as Operation;
    refuses([plugin({ operations: { raw } })], /operation "raw" must be made with defineOperation\(\)/);
    refuses([plugin({ operations: { nothing: undefined as unknown as Operation } })], /operation "nothing" must be made with defineOperation\(\)/);
  });

  it('refuses an entity table not prefixed with the plugin id', () => {
    const entity = (tableName: string) =>
      new EntitySchema<{ id: string }>({ name: `E${tableName.replace(/\W/g, '')}`, tableName, properties: { id: { type: 'uuid', primary: true } } });
    refuses(
      [plugin({ id: 'task-board', group: 'BoardRpc', entities: [entity('card')] })],
      /Plugin "task-board": entity Ecard: table "card" must start with "task_board_"/,
    );
    refuses([plugin({ id: 'task-board', group: 'BoardRpc', entities: [entity('taskboard_card')] })], /must start with "task_board_"/);
    assert.equal(validatePlugins([plugin({ id: 'task-board', group: 'BoardRpc', entities: [entity('task_board_card')] })]).length, 1);
  });

  it('refuses a service name already taken by another plugin', () => {
    refuses(
      [
        plugin({ id: 'first', group: 'FirstRpc', services: { shared: asValue(1) } }),
        plugin({ id: 'second', group: 'SecondRpc', services: { shared: asValue(2) } }),
      ],
      /Plugin "second": service "shared" is already registered by plugin "first"/,
    );
  });

  it('refuses a table that carries the longer prefix of another plugin', () => {
    const entity = new EntitySchema<{ id: string }>({ name: 'Card', tableName: 'task_board_card', properties: { id: { type: 'uuid', primary: true } } });
    refuses(
      [plugin({ id: 'task', group: 'TaskRpc', entities: [entity] }), plugin({ id: 'task-board', group: 'BoardRpc' })],
      /table "task_board_card" looks like a table of plugin "task-board"/,
    );
  });

  it('orders plugins so that dependencies come first', () => {
    const app = plugin({ id: 'app', group: 'AppRpc', dependsOn: ['board', 'base'] });
    const board = plugin({ id: 'board', group: 'BoardRpc', dependsOn: ['base'] });
    const base = plugin({ id: 'base', group: 'BaseRpc' });
    const loose = plugin({ id: 'loose', group: 'LooseRpc' });
    const ordered = validatePlugins([app, loose, board, base]).map((p) => p.id);
    assert.deepEqual(ordered, ['base', 'board', 'app', 'loose']);
    for (const p of [app, board, base, loose]) {
      for (const dependency of p.dependsOn ?? []) {
        assert.ok(ordered.indexOf(dependency) < ordered.indexOf(p.id), `${dependency} must come before ${p.id}`);
      }
    }
  });
});

describe('createApp and plugins', () => {
  const dataDirs: string[] = [];
  const freshDataDir = () => {
    const dir = mkdtempSync(path.join(tmpdir(), 'rpc-loader-test-'));
    dataDirs.push(dir);
    return dir;
  };
  after(() => {
    for (const dir of dataDirs) rmSync(dir, { recursive: true, force: true });
  });

  it('refuses to start with a plugin that declares an operation of another group', async () => {
    const thief = plugin({ id: 'thief', group: 'ThiefRpc', operations: { 'AuthRpc.login': userOp } });
    await assert.rejects(startTestApp({ extraPlugins: [thief], dataDir: freshDataDir() }), (error: unknown) => {
      assert.ok(error instanceof PluginLoadError, String(error));
      assert.match(error.message, /Plugin "thief" \(group ThiefRpc\) declares operation "AuthRpc\.login" outside its own group/);
      return true;
    });
  });

  it('refuses to start with a plugin that claims a core group', async () => {
    const impostor = plugin({ id: 'impostor', group: 'AuthRpc', operations: { whoever: userOp } });
    await assert.rejects(startTestApp({ extraPlugins: [impostor], dataDir: freshDataDir() }), (error: unknown) => {
      assert.ok(error instanceof PluginLoadError, String(error));
      assert.match(error.message, /Plugin "impostor": group AuthRpc already belongs to plugin "auth"/);
      return true;
    });
  });

  it('refuses to start with a plugin that would replace a core service', async () => {
    for (const name of ['db', 'metrics', 'sessionService', 'authenticator', 'dispatcher']) {
      const usurper = plugin({ id: 'usurper', group: 'UsurperRpc', services: { [name]: asValue('nope') } });
      await assert.rejects(startTestApp({ extraPlugins: [usurper], dataDir: freshDataDir() }), (error: unknown) => {
        assert.ok(error instanceof PluginLoadError, String(error));
        assert.equal(error.message, `Plugin "usurper": service "${name}" is already registered by the core`);
        return true;
      });
    }
  });
});

describe('plugins named in PLUGINS', () => {
  let t: TestApp;
  let dir: string;

  before(async () => {
    dir = mkdtempSync(path.join(tmpdir(), 'rpc-plugins-'));
    t = await startTestApp(); // loads the notes plugin by path through PLUGINS
  });
  after(async () => {
    await t?.close();
    rmSync(dir, { recursive: true, force: true });
  });

  it('loads the notes plugin given by path and serves its operations', async () => {
    assert.deepEqual(t.app.config.plugins, [NOTES_PLUGIN]);
    assert.ok(t.app.plugins.some((p) => p.id === 'notes' && p.group === 'NoteRpc'));
    for (const name of ['add', 'list', 'remove', 'stats', 'whoAmI']) {
      const operation = t.app.registry.get(`NoteRpc.${name}`);
      assert.ok(operation, `NoteRpc.${name} is registered`);
      assert.equal(operation.pluginId, 'notes');
      assert.equal(operation.access, 'user');
    }
    const listing = await (await fetch(`${t.url}/api/rpc`)).json();
    assert.ok(listing.data.operations.some((op: { method: string }) => op.method === 'NoteRpc.add'));

    const owner = await t.signup(uniqueName('notes'));
    const note = await t.ok('NoteRpc.add', { text: '  loaded through PLUGINS  ' }, { token: owner.token });
    assert.equal(note.text, 'loaded through PLUGINS');
    const list = await t.ok('NoteRpc.list', {}, { token: owner.token });
    assert.deepEqual(list.data.map((n: { _id: string }) => n._id), [note._id]);
    assert.equal(list.totalCount, 1);
    const refused = await t.call('NoteRpc.list', {});
    assert.equal(refused.status, 401);
  });

  it('imports a plugin folder by path, through its package.json main when it has one', async () => {
    const plugins = await importPackagePlugins([NOTES_PLUGIN]);
    assert.deepEqual(plugins.map((p) => p.id), ['notes']);
    const relative = path.relative(dir, NOTES_PLUGIN);
    assert.deepEqual((await importPackagePlugins([`./${relative}`], dir)).map((p) => p.id), ['notes']);

    const folder = path.join(dir, 'by-main');
    mkdirSync(folder);
    const defineUrl = pathToFileURL(path.join(ROOT, 'core/plugin/define.ts')).href;
    const source = (id: string, group: string) =>
      `import { definePlugin } from ${JSON.stringify(defineUrl)};\n` +
      `export const plugin = definePlugin({ id: '${id}', group: '${group}', coreVersion: '^1.0.0', operations: {} });\n`;
    writeFileSync(path.join(folder, 'package.json'), JSON.stringify({ name: 'by-main', type: 'module', main: 'entry.mjs' }));
    writeFileSync(path.join(folder, 'entry.mjs'), source('by-main', 'ByMainRpc'));
    writeFileSync(path.join(folder, 'index.js'), source('by-index', 'ByIndexRpc'));
    assert.deepEqual((await importPackagePlugins([folder])).map((p) => p.id), ['by-main']);
  });

  it('refuses a package that is not installed, naming it', async () => {
    await assert.rejects(importPackagePlugins(['@nope/not-installed']), (error: unknown) => {
      assert.ok(error instanceof PluginLoadError, String(error));
      assert.match(error.message, /Cannot import plugin package "@nope\/not-installed" named in PLUGINS/);
      return true;
    });
  });

  it('refuses a module exporting a plain object, telling to wrap it in definePlugin', async () => {
    const file = path.join(dir, 'plain-plugin.mjs');
    writeFileSync(file, "export default { id: 'plain', group: 'PlainRpc', coreVersion: '^1.0.0', operations: {} };\n");
    for (const [specifier, cwd] of [[file, undefined], ['./plain-plugin.mjs', dir]] as const) {
      await assert.rejects(importPackagePlugins([specifier], cwd), (error: unknown) => {
        assert.ok(error instanceof PluginLoadError, String(error));
        assert.match(error.message, new RegExp(`${escape(specifier)} exports a plain object, not a plugin: wrap it in definePlugin\\(\\)`));
        return true;
      });
    }
  });

  it('refuses a module that exports no plugin at all', async () => {
    const file = path.join(dir, 'empty-plugin.mjs');
    writeFileSync(file, 'export const answer = 42;\n');
    await assert.rejects(importPackagePlugins([file]), /empty-plugin\.mjs" named in PLUGINS exports no plugin made with definePlugin\(\)/);
  });
});

describe('plugin extension points', () => {
  it('runs start before serving, delivers subscribed events, and runs stop on shutdown', async () => {
    const seen: string[] = [];
    const received: unknown[] = [];
    const listener = plugin({
      id: 'listener',
      group: 'ListenerRpc',
      dependsOn: ['notes'],
      start: (deps) => {
        seen.push(`start:${typeof deps.bus.publish}`);
      },
      stop: () => {
        seen.push('stop');
      },
      subscribers: {
        'note.added': (event) => {
          received.push(event.payload);
        },
      },
    });
    const t = await startTestApp({ extraPlugins: [listener] });
    try {
      assert.deepEqual(seen, ['start:function']);
      const account = await t.signup();
      const note = await t.ok('NoteRpc.add', { text: 'heard by a plugin' }, { token: account.token });
      assert.deepEqual(received, [note]);
      assert.deepEqual(t.app.plugins.map((p) => p.id).slice(-2), ['notes', 'listener']);
    } finally {
      await t.close();
    }
    assert.deepEqual(seen, ['start:function', 'stop']);
  });
});
