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
import { CORE_EXTENSION_POINTS } from '../../core/app/app.ts';
import { definePlugin, type Plugin, type PluginDefinition } from '../../core/plugin/define.ts';
import type { PluginErrorCode } from '../../core/base/plugin-errors.ts';
import type { Deps } from '../../core/plugin/services.ts';
import { importPackagePlugins, PluginLoadError, selectPlugins, validatePlugins } from '../../core/plugin/loader.ts';
import { defineOperation, type Operation } from '../../core/rpc/operation.ts';
import { RpcError, type ErrorCode } from '../../core/base/errors.ts';
import { defineJob } from '../../core/jobs/job-service.ts';
import { ConfigError } from '../../core/base/config.ts';
import { CORE_VERSION } from '../../core/base/version.ts';
import { NOTES_PLUGIN, startTestApp, uniqueName, type TestApp } from '../support/harness.ts';

const ROOT = fileURLToPath(new URL('../..', import.meta.url));
const escape = (text: string) => text.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');

const userOp = defineOperation({ access: 'user', describe: 'A harmless operation.', params: v.object({}), handler: () => 'pong' });

/** A plugin `mine` with one operation, changed by `overrides`; `D` types the deps its hooks receive. */
const plugin = <D = unknown>(overrides: Partial<PluginDefinition<D>> = {}): Plugin =>
  definePlugin<D>({ id: 'mine', group: 'MineRpc', coreVersion: '^2.0.0', operations: { ping: userOp }, ...overrides });

/** Asserts that validatePlugins refuses with a PluginLoadError of this code, naming the plugin when given. */
function refuses(plugins: Plugin[], code: PluginErrorCode, names?: string): void {
  assert.throws(
    () => validatePlugins(plugins, CORE_EXTENSION_POINTS),
    (error: unknown) => {
      assert.ok(error instanceof PluginLoadError, `expected a PluginLoadError, got ${String(error)}`);
      assert.equal(error.code, code, error.message);
      if (names) assert.ok(error.message.includes(names), `"${error.message}" should name ${names}`);
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
    refuses([plugin({ operations: { ping: userOp, 'OtherRpc.steal': userOp } })], 'PLUGIN_OPERATION_OUTSIDE_GROUP', '"OtherRpc.steal"');
    // The plugin's own group written out in full is fine.
    assert.equal(validatePlugins([plugin({ operations: { 'MineRpc.ping': userOp } })]).length, 1);
  });

  it('refuses duplicate plugin ids', () => {
    refuses([plugin({ id: 'dup', group: 'FirstRpc' }), plugin({ id: 'dup', group: 'SecondRpc' })], 'PLUGIN_DUPLICATE_ID', '"dup"');
  });

  it('refuses two plugins with one group', () => {
    refuses([plugin({ id: 'first', group: 'SameRpc' }), plugin({ id: 'second', group: 'SameRpc' })], 'PLUGIN_DUPLICATE_GROUP', '"first"');
  });

  it('refuses an id that is not kebab-case', () => {
    for (const id of ['TaskBoard', 'task_board', 'task--board', '-task', 'task-', '1task', '']) {
      refuses([plugin({ id })], 'PLUGIN_INVALID_ID', `"${id}"`);
    }
    assert.equal(validatePlugins([plugin({ id: 'task-board2' })]).length, 1);
  });

  it('refuses a group name that does not look like <Name>Rpc', () => {
    for (const group of ['Task', 'taskRpc', 'TaskRPC', 'Task-Rpc', 'Rpc', '']) {
      refuses([plugin({ group })], 'PLUGIN_INVALID_GROUP', `"${group}"`);
    }
  });

  it('refuses a core version range this core does not satisfy', () => {
    const next = `^${semver.major(CORE_VERSION) + 1}.0.0`;
    const older = `<${CORE_VERSION}`;
    for (const range of [next, older]) {
      refuses([plugin({ coreVersion: range })], 'PLUGIN_CORE_VERSION', `"${range}", but this core is ${CORE_VERSION}`);
    }
    refuses([plugin({ coreVersion: 'not a range' })], 'PLUGIN_CORE_VERSION', '"not a range" is not a valid semver range');
    for (const range of [`^${CORE_VERSION}`, `>=${CORE_VERSION}`, `${semver.major(CORE_VERSION)}.x`]) {
      assert.equal(validatePlugins([plugin({ coreVersion: range })]).length, 1, range);
    }
  });

  it('refuses a missing dependency', () => {
    refuses([plugin({ id: 'needy', dependsOn: ['ghost'] })], 'PLUGIN_MISSING_DEPENDENCY', '"ghost"');
  });

  it('refuses a dependency cycle, naming its members', () => {
    refuses(
      [plugin({ id: 'alpha', group: 'AlphaRpc', dependsOn: ['beta'] }), plugin({ id: 'beta', group: 'BetaRpc', dependsOn: ['alpha'] })],
      'PLUGIN_DEPENDENCY_CYCLE',
      'alpha → beta → alpha',
    );
    refuses([plugin({ id: 'selfish', dependsOn: ['selfish'] })], 'PLUGIN_DEPENDENCY_CYCLE', 'selfish → selfish');
  });

  it('refuses a public operation outside AuthRpc', () => {
    const open = defineOperation({ access: 'public', describe: 'Anyone may call this.', params: v.object({}), handler: () => 1 });
    refuses([plugin({ operations: { open } })], 'PLUGIN_PUBLIC_OPERATION', '"open"');
    // The same operation is fine under AuthRpc.
    assert.equal(validatePlugins([plugin({ id: 'auth-extra', group: 'AuthRpc', operations: { open } })]).length, 1);
  });

  it('refuses an operation not made with defineOperation', () => {
    const raw = { access: 'user', describe: 'Hand-made.', params: v.object({}), handler: () => 1 } as unknown as Operation;
    refuses([plugin({ operations: { raw } })], 'PLUGIN_INVALID_OPERATION', '"raw"');
    refuses([plugin({ operations: { nothing: undefined as unknown as Operation } })], 'PLUGIN_INVALID_OPERATION', '"nothing"');
  });

  it('refuses an entity table not prefixed with the plugin id', () => {
    const entity = (tableName: string) =>
      new EntitySchema<{ id: string }>({ name: `E${tableName.replace(/\W/g, '')}`, tableName, properties: { id: { type: 'uuid', primary: true } } });
    refuses([plugin({ id: 'task-board', group: 'BoardRpc', entities: [entity('card')] })], 'PLUGIN_TABLE_PREFIX', '"card"');
    refuses([plugin({ id: 'task-board', group: 'BoardRpc', entities: [entity('taskboard_card')] })], 'PLUGIN_TABLE_PREFIX', '"task_board_"');
    refuses([plugin({ id: 'task-board', group: 'BoardRpc', entities: [entity('task_boards')] })], 'PLUGIN_TABLE_PREFIX', '"task_boards"');
    assert.equal(validatePlugins([plugin({ id: 'task-board', group: 'BoardRpc', entities: [entity('task_board_card')] })]).length, 1);
    assert.equal(validatePlugins([plugin({ id: 'task-board', group: 'BoardRpc', entities: [entity('task_board')] })]).length, 1);
  });

  it('refuses a service name already taken by another plugin', () => {
    refuses(
      [
        plugin({ id: 'first', group: 'FirstRpc', services: { shared: asValue(1) } }),
        plugin({ id: 'second', group: 'SecondRpc', services: { shared: asValue(2) } }),
      ],
      'PLUGIN_DUPLICATE_SERVICE',
      'plugin "first"',
    );
    for (const name of ['db', 'bus', 'credentials', 'config', 'logger', 'extensions']) {
      refuses([plugin({ services: { [name]: asValue('nope') } })], 'PLUGIN_DUPLICATE_SERVICE', 'the core');
    }
  });

  it('refuses a table that carries the longer prefix of another plugin', () => {
    const entity = new EntitySchema<{ id: string }>({ name: 'Card', tableName: 'task_board_card', properties: { id: { type: 'uuid', primary: true } } });
    refuses(
      [plugin({ id: 'task', group: 'TaskRpc', entities: [entity] }), plugin({ id: 'task-board', group: 'BoardRpc' })],
      'PLUGIN_TABLE_PREFIX',
      'plugin "task-board"',
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

  /** Asserts that the app does not start, with a PluginLoadError of this code. */
  const refusesToStart = (extraPlugins: Plugin[], code: PluginErrorCode, names: string) =>
    assert.rejects(startTestApp({ extraPlugins, dataDir: freshDataDir() }), (error: unknown) => {
      assert.ok(error instanceof PluginLoadError, String(error));
      assert.equal(error.code, code, error.message);
      assert.ok(error.message.includes(names), error.message);
      return true;
    });

  it('refuses to start with a plugin that declares an operation of another group', async () => {
    await refusesToStart(
      [plugin({ id: 'thief', group: 'ThiefRpc', operations: { 'AuthRpc.login': userOp } })],
      'PLUGIN_OPERATION_OUTSIDE_GROUP',
      '"AuthRpc.login"',
    );
  });

  it('refuses to start with a plugin that claims the group of a built-in plugin', async () => {
    await refusesToStart([plugin({ id: 'impostor', group: 'AuthRpc', operations: { whoever: userOp } })], 'PLUGIN_DUPLICATE_GROUP', 'plugin "auth"');
  });

  it('refuses to start with a plugin that would replace a core or built-in service', async () => {
    await refusesToStart([plugin({ services: { db: asValue('nope') } })], 'PLUGIN_DUPLICATE_SERVICE', 'the core');
    await refusesToStart([plugin({ services: { sessionService: asValue('nope') } })], 'PLUGIN_DUPLICATE_SERVICE', 'plugin "auth"');
  });

  it('refuses a service no one exports, and a private service of another plugin', async () => {
    await refusesToStart([plugin({ deps: ['ghostService' as never] })], 'PLUGIN_UNKNOWN_SERVICE', '"ghostService"');
    // The auth plugin's AuthService is its own; only what it exports is for others.
    await refusesToStart([plugin({ deps: ['authService' as never] })], 'PLUGIN_UNKNOWN_SERVICE', '"authService"');
  });

  it('refuses a contribution to an unknown extension point, and an invalid one to a known point', async () => {
    await refusesToStart([plugin({ extends: { 'nobody.here': [{}] } as never })], 'PLUGIN_UNKNOWN_EXTENSION_POINT', '"nobody.here"');
    await refusesToStart(
      [plugin({ extends: { 'auth.lifecycle': [{ afterSignin: () => undefined }] } as never })],
      'PLUGIN_INVALID_CONTRIBUTION',
      '"auth.lifecycle"',
    );
    await refusesToStart([plugin({ extends: { 'core.events': [{ name: 'NotDotted', describe: 'x' }] } })], 'PLUGIN_INVALID_CONTRIBUTION', 'name');
    // A function of the plugin's deps: the point must exist at load, what it returns is checked once the deps exist.
    await refusesToStart([plugin({ extends: { 'nobody.here': () => [{}] } as never })], 'PLUGIN_UNKNOWN_EXTENSION_POINT', '"nobody.here"');
    await refusesToStart([plugin({ extends: { 'core.events': () => [{ name: 'NotDotted', describe: 'x' }] } })], 'PLUGIN_INVALID_CONTRIBUTION', 'name');
    await refusesToStart(
      [plugin({ extends: { 'core.events': () => ({ name: 'not.listed', describe: 'x' }) } as never })],
      'PLUGIN_INVALID_CONTRIBUTION',
      'must be an array',
    );
    await refusesToStart(
      [plugin({ extends: { 'core.events': [{ name: 'note.added', describe: 'Mine too.' }] } })],
      'PLUGIN_INVALID_CONTRIBUTION',
      'already declared by plugin "notes"',
    );
  });

  it('refuses a setting of the core or another plugin, and a config that is not an object schema', async () => {
    const config = (entries: v.ObjectEntries) => v.object(entries);
    await refusesToStart([plugin({ config: config({ PORT: v.optional(v.string()) }) })], 'PLUGIN_DUPLICATE_SETTING', 'PORT');
    await refusesToStart([plugin({ config: config({ SIGNUP_MODE: v.optional(v.string()) }) })], 'PLUGIN_DUPLICATE_SETTING', 'plugin "auth"');
    await refusesToStart([plugin({ config: v.string() as never })], 'PLUGIN_INVALID_CONFIG_SCHEMA', '"mine"');
    await refusesToStart([plugin({ config: config({ lowerCase: v.optional(v.string()) }) })], 'PLUGIN_INVALID_CONFIG_SCHEMA', 'lowerCase');
  });

  it('refuses migrations that are not migration classes', async () => {
    await refusesToStart([plugin({ migrations: ['create table mine_x ()'] as never })], 'PLUGIN_INVALID_MIGRATION', '"mine"');
    // A class generated for MikroORM's migrator, without the SDK's base class.
    class Migration20990101000000_orm {
      async up(): Promise<void> {}
    }
    await refusesToStart([plugin({ migrations: [Migration20990101000000_orm] as never })], 'PLUGIN_INVALID_MIGRATION', 'rpc-service/plugin');
  });

  it('refuses jobs not made by defineJob, with a bad name or a bad schedule', () => {
    const job = defineJob({ describe: 'A job.', data: v.object({}), handler: () => undefined });
    refuses([plugin({ jobs: { 'Bad name': job } })], 'PLUGIN_INVALID_JOB', 'Bad name');
    refuses([plugin({ jobs: { plain: { describe: 'x', data: v.object({}), handler: () => undefined } as never } })], 'PLUGIN_INVALID_JOB', 'defineJob');
    refuses([plugin({ jobs: { nightly: { ...job, schedule: 'every night' } } })], 'PLUGIN_INVALID_JOB', 'five-field cron');
    assert.doesNotThrow(() => validatePlugins([plugin({ jobs: { nightly: { ...job, schedule: '0 3 * * *' } } })], CORE_EXTENSION_POINTS));
  });

  it('refuses an error code of the core or of another plugin, and one that is not UPPER_SNAKE_CASE with a 4xx or 5xx status', async () => {
    refuses([plugin({ errors: { NOT_FOUND: 404 } })], 'PLUGIN_DUPLICATE_ERROR_CODE', 'the core');
    const twins = [
      plugin({ id: 'first', group: 'FirstRpc', errors: { MINE_FAILED: 422 } }),
      plugin({ id: 'second', group: 'SecondRpc', errors: { MINE_FAILED: 422 } }),
    ];
    refuses(twins, 'PLUGIN_DUPLICATE_ERROR_CODE', 'plugin "first"');
    await refusesToStart([plugin({ errors: { WORKFLOW_FAILED: 422 } })], 'PLUGIN_DUPLICATE_ERROR_CODE', 'plugin "workflow"');
    refuses([plugin({ errors: { 'mine-failed': 422 } })], 'PLUGIN_INVALID_ERROR_CODE', 'mine-failed');
    refuses([plugin({ errors: { MINE_FAILED: 200 } })], 'PLUGIN_INVALID_ERROR_CODE', 'MINE_FAILED');
  });

  it("answers a plugin's own error code with the status it declared, in the usual envelope", async () => {
    // The cast stands for the PluginErrorCodes declaration a plugin makes (plugins/workflow/index.ts).
    const teapot = defineOperation({
      access: 'user',
      describe: 'Always refuses.',
      params: v.object({}),
      handler: () => {
        throw new RpcError('LOADER_TEST_TEAPOT' as ErrorCode, 'I am a teapot');
      },
    });
    const teapotPlugin = plugin({ id: 'teapot', group: 'TeapotRpc', errors: { LOADER_TEST_TEAPOT: 418 }, operations: { brew: teapot } });
    const t = await startTestApp({ plugins: ['auth', 'teapot'], extraPlugins: [teapotPlugin] });
    try {
      const { token } = await t.signup();
      const answer = await t.call('TeapotRpc.brew', {}, { token });
      assert.equal(answer.status, 418);
      assert.deepEqual(answer.body, { success: false, data: { error: 'I am a teapot', code: 'LOADER_TEST_TEAPOT' } });
    } finally {
      await t.close();
    }
    // RpcError reads a code's status without knowing the app: the same code may not mean another status in this process.
    refuses([plugin({ errors: { LOADER_TEST_TEAPOT: 409 } })], 'PLUGIN_DUPLICATE_ERROR_CODE', 'HTTP status 418');
  });
});

describe('plugin deps, settings and extension points', () => {
  it('gives each plugin exactly the services it names, ordering it after the plugins it uses', async () => {
    const seen: Record<string, unknown> = {};
    const consumer = plugin({
      id: 'consumer',
      group: 'ConsumerRpc',
      deps: ['userService', 'bus'],
      operations: {
        probe: defineOperation({
          access: 'user',
          describe: 'What the plugin can reach.',
          params: v.object({}),
          handler: ({ deps }: { deps: Record<string, unknown> }) => {
            for (const name of ['userService', 'bus', 'config', 'logger', 'extensions']) seen[name] = typeof deps[name];
            // Not named in deps: not there, even though the core and the auth plugin have them.
            for (const name of ['db', 'authService', 'sessionService']) {
              try {
                void deps[name];
                seen[name] = 'reachable';
              } catch {
                seen[name] = 'unreachable';
              }
            }
            return true;
          },
        }),
      },
    });
    // Listed before auth, but it uses auth's userService, so it loads after auth.
    assert.deepEqual(
      validatePlugins([consumer, plugin({ id: 'auth', group: 'AuthRpc', services: { userService: asValue({}) }, exports: ['userService'] })]).map((p) => p.id),
      ['auth', 'consumer'],
    );
    const t = await startTestApp({ extraPlugins: [consumer], plugins: ['consumer'] });
    try {
      const account = await t.signup();
      await t.ok('ConsumerRpc.probe', {}, { token: account.token });
      assert.deepEqual(seen, {
        userService: 'object',
        bus: 'object',
        config: 'object',
        logger: 'object',
        extensions: 'object',
        db: 'unreachable',
        authService: 'unreachable',
        sessionService: 'unreachable',
      });
    } finally {
      await t.close();
    }
  });

  it("validates a plugin's settings at start and hands them to it parsed", async () => {
    await assert.rejects(startTestApp({ env: { NOTES_MAX_LENGTH: 'lots' } }), (error: unknown) => {
      assert.ok(error instanceof ConfigError, String(error));
      assert.equal(error.message, 'Invalid configuration: NOTES_MAX_LENGTH must be a whole number');
      return true;
    });
    const t = await startTestApp({ env: { NOTES_MAX_LENGTH: '12' } });
    try {
      assert.deepEqual(t.app.depsOf('notes').config, { maxLength: 12, retentionDays: 0 });
      const account = await t.signup();
      await t.ok('NoteRpc.add', { text: 'twelve chars' }, { token: account.token });
      const refused = await t.call('NoteRpc.add', { text: 'thirteen char' }, { token: account.token });
      assert.equal(refused.body.data.code, 'VALIDATION_ERROR');
      assert.deepEqual(refused.body.data.issues, [{ path: 'text', message: 'text must be at most 12 characters' }]);
    } finally {
      await t.close();
    }
  });

  it('hands contributions to the declaring plugin in load order, those given as a function made from the contributor’s own deps', async () => {
    let shoutDeps: { bus: { publish: unknown } } | undefined;
    const shout = plugin<Deps<['bus']>>({
      id: 'shout',
      group: 'ShoutRpc',
      deps: ['bus'],
      extends: {
        'notes.textFilters': (deps) => {
          shoutDeps = deps;
          return [{ name: 'upper', apply: (text: string) => text.toUpperCase() }];
        },
      },
    });
    const mark = plugin({
      id: 'mark',
      group: 'MarkRpc',
      dependsOn: ['shout'],
      extends: { 'notes.textFilters': [{ name: 'mark', apply: (text: string) => `${text}!` }] },
    });
    const t = await startTestApp({ extraPlugins: [mark, shout] });
    try {
      const contributions = t.app.depsOf('notes').extensions.get('notes.textFilters');
      assert.deepEqual(
        contributions.map((c: { pluginId: string }) => c.pluginId),
        ['shout', 'mark'],
      );
      assert.equal(typeof shoutDeps?.bus.publish, 'function');
      const account = await t.signup();
      const note = await t.ok('NoteRpc.add', { text: 'hello' }, { token: account.token });
      assert.equal(note.text, 'HELLO!');
      // A plugin reads only the points it declares.
      assert.throws(() => t.app.depsOf('shout').extensions.get('notes.textFilters'), /does not declare/);
    } finally {
      await t.close();
    }
  });

  it('lists the event catalogue in GET /api/rpc', async () => {
    const t = await startTestApp();
    try {
      const listing = await (await fetch(`${t.url}/api/rpc`)).json();
      assert.deepEqual(
        listing.data.events.map((event: { name: string }) => event.name),
        [
          'factor.changed',
          'factorPolicy.changed',
          'webhook.test',
          'dataScopeRefreshed',
          'notification.created',
          'secret.changed',
          'scopedSecret.changed',
          'task.created',
          'task.updated',
          'task.assigned',
          'task.commented',
          'workflow.completed',
          'workflow.failed',
          'workflow.waiting',
          'note.added',
          'notes.tallied',
        ],
      );
      const [added, tallied] = listing.data.events.slice(-2);
      assert.equal(added.describe, 'A note was added to the subscription; the payload is the note.');
      assert.deepEqual(added.payload.required, ['_id', 'userId', 'text', 'createdAt']);
      assert.deepEqual(tallied, {
        name: 'notes.tallied',
        describe: "The subscription's notes were counted again; the payload is {notes, words}.",
        payload: {
          type: 'object',
          properties: { notes: { type: 'number' }, words: { type: 'number' } },
          required: ['notes', 'words'],
          additionalProperties: false,
        },
      });
    } finally {
      await t.close();
    }
  });

  it('starts only the plugins under test and those they need', async () => {
    const all = await importPackagePlugins([NOTES_PLUGIN]);
    assert.deepEqual(
      selectPlugins(all, ['notes']).map((p) => p.id),
      ['notes'],
    );
    const t = await startTestApp({ plugins: ['api-key'] });
    try {
      // ApiKeyRpc uses the auth plugin's users; nothing else starts.
      assert.deepEqual(
        t.app.plugins.map((p) => p.id),
        ['auth', 'api-key'],
      );
      assert.equal(t.app.registry.get('AdminUserRpc.getData'), undefined);
      const account = await t.signup();
      const key = await t.as(account).ApiKeyRpc.create({ description: 'in a small backend' });
      assert.equal((await t.as({ apiKey: key.fullKey }).AuthRpc.getSession()).user._id, account.user._id);
    } finally {
      await t.close();
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
    assert.deepEqual(
      list.data.map((n: { _id: string }) => n._id),
      [note._id],
    );
    assert.equal(list.totalCount, 1);
    const refused = await t.call('NoteRpc.list', {});
    assert.equal(refused.status, 401);
  });

  it('imports a plugin folder by path, through its package.json main when it has one', async () => {
    const plugins = await importPackagePlugins([NOTES_PLUGIN]);
    assert.deepEqual(
      plugins.map((p) => p.id),
      ['notes'],
    );
    const relative = path.relative(dir, NOTES_PLUGIN);
    assert.deepEqual(
      (await importPackagePlugins([`./${relative}`], dir)).map((p) => p.id),
      ['notes'],
    );

    const folder = path.join(dir, 'by-main');
    mkdirSync(folder);
    const defineUrl = pathToFileURL(path.join(ROOT, 'core/plugin/define.ts')).href;
    const source = (id: string, group: string) =>
      `import { definePlugin } from ${JSON.stringify(defineUrl)};\n` +
      `export const plugin = definePlugin({ id: '${id}', group: '${group}', coreVersion: '^2.0.0', operations: {} });\n`;
    writeFileSync(path.join(folder, 'package.json'), JSON.stringify({ name: 'by-main', type: 'module', main: 'entry.mjs' }));
    writeFileSync(path.join(folder, 'entry.mjs'), source('by-main', 'ByMainRpc'));
    writeFileSync(path.join(folder, 'index.js'), source('by-index', 'ByIndexRpc'));
    assert.deepEqual(
      (await importPackagePlugins([folder])).map((p) => p.id),
      ['by-main'],
    );
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
    writeFileSync(file, "export default { id: 'plain', group: 'PlainRpc', coreVersion: '^2.0.0', operations: {} };\n");
    for (const [specifier, cwd] of [
      [file, undefined],
      ['./plain-plugin.mjs', dir],
    ] as const) {
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
    const listener = plugin<Deps<['bus']>>({
      id: 'listener',
      group: 'ListenerRpc',
      dependsOn: ['notes'],
      deps: ['bus'],
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
