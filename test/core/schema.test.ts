import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { fileURLToPath } from 'node:url';
import * as v from 'valibot';
import { Migration } from '../../core/db/migration.ts';
import { DatabaseStartupError, preparedRead } from '../../core/db/orm.ts';
import { definePlugin } from '../../core/plugin/define.ts';
import { defineOperation } from '../../core/rpc/operation.ts';
import { createScratchDatabase, TEST_DATABASE_URL } from '../support/database.ts';
import { startTestApp, type TestApp } from '../support/harness.ts';

const ROOT = fileURLToPath(new URL('../..', import.meta.url));

/**
 * Entities are the one definition of every table; the checked-in migrations
 * are generated from them. On the database this run uses (PGlite, or
 * PostgreSQL with TEST_DATABASE_URL), migrating from empty must give exactly
 * the schema the entities describe, so both engines end up the same.
 */
describe('database schema', () => {
  let t: TestApp;
  before(async () => {
    t = await startTestApp();
  });
  after(() => t.close());

  it('after the migrations, the schema is exactly what the entities define', async () => {
    const { orm } = t.app.deps.db;
    const diff = await orm.schema.getUpdateSchemaSQL({ wrap: false });
    assert.equal(diff.trim(), '', `migrations and entities disagree:\n${diff}`);
    const tables = await t.app.deps.db.execute<{ table_name: string }>(
      `select table_name from information_schema.tables where table_schema = 'public' order by table_name`,
    );
    const owned = (prefix: string) => tables.map((row) => row.table_name).filter((name) => name === prefix || name.startsWith(`${prefix}_`));
    assert.deepEqual(owned('api_key'), ['api_key']);
    assert.deepEqual(owned('auth'), [
      'auth_external_login',
      'auth_invite_code',
      'auth_oauth_link',
      'auth_oauth_state',
      'auth_otp_request',
      'auth_outbox',
      'auth_pending_link',
      'auth_session',
      'auth_subscription',
      'auth_user',
    ]);
    assert.deepEqual(owned('notes'), ['notes']);
  });

  it('runs a prepared read again and again with its own values, and refuses a reused name and array values', async () => {
    const count = preparedRead('test_migration_count', 'select count(*)::int as n from core_migrations');
    const byName = preparedRead('test_migration_by_name', 'select name from core_migrations where name = $1');
    const [first] = await t.app.deps.db.read<{ n: number }>(count, []);
    assert.ok(first!.n >= 3, `${first!.n} migrations`);
    assert.deepEqual(await t.app.deps.db.read(count, []), [first]);
    for (const name of ['core:Migration20261123171538_initial', 'auth:Migration20261123171525_initial', "x' or '1'='1"]) {
      const rows = await t.app.deps.db.read<{ name: string }>(byName, [name]);
      assert.deepEqual(rows, name.startsWith('x') ? [] : [{ name }]);
    }
    assert.throws(() => preparedRead('test_migration_count', 'select 1'), /already declared with other SQL/);
    assert.equal(preparedRead('test_migration_count', count.sql).sql, count.sql);
    assert.throws(() => t.app.deps.db.read(byName, [['a', 'b']]), /values must be scalars/);
  });

  it('every owner has a migration for its current entities (npm run migration:create -- --check)', () => {
    const result = spawnSync(process.execPath, ['--import', 'tsx', 'core/cli/cli.ts', 'migration', 'create', '--check'], {
      cwd: ROOT,
      env: { ...process.env, PLUGINS: './test/fixtures/notes-plugin' },
      encoding: 'utf8',
    });
    assert.equal(result.status, 0, result.stderr || result.stdout);
    assert.match(result.stdout, /Migrations match the entities of core, .*auth.*notes/);
  });

  it('refuses a database made before plugins owned their tables, instead of migrating over it', async () => {
    const dataDir = mkdtempSync(path.join(tmpdir(), 'rpc-v1-'));
    const scratch = TEST_DATABASE_URL ? await createScratchDatabase(TEST_DATABASE_URL) : undefined;
    try {
      const first = await startTestApp({ dataDir, persistent: true, databaseUrl: scratch?.url });
      await first.app.deps.db.execute(`insert into core_migrations (name, executed_at) values ('core:0001_identity', now())`);
      await first.close();
      await assert.rejects(startTestApp({ dataDir, persistent: true, databaseUrl: scratch?.url }), (error: unknown) => {
        assert.ok(error instanceof DatabaseStartupError, String(error));
        assert.match(error.message, /cannot be upgraded in place/);
        return true;
      });
    } finally {
      await scratch?.drop();
      rmSync(dataDir, { recursive: true, force: true });
    }
  });

  it(
    'a new embedded database is a copy of the template cluster, with fsync on and a 16 MB buffer cache, and keeps its data',
    { skip: TEST_DATABASE_URL ? 'the embedded database only' : false },
    async () => {
      const dataDir = mkdtempSync(path.join(tmpdir(), 'rpc-template-'));
      try {
        const first = await startTestApp({ dataDir, persistent: true });
        const [settings] = await first.app.deps.db.execute(`select current_setting('fsync') as fsync, current_setting('shared_buffers') as buffers`);
        assert.deepEqual(settings, { fsync: 'on', buffers: '16MB' });
        const account = await first.signup();
        await first.close();
        // The copy was renamed into place: nothing half-made is left beside it.
        assert.deepEqual(
          readdirSync(dataDir).filter((name) => name.startsWith('db')),
          ['db'],
        );
        const second = await startTestApp({ dataDir, persistent: true });
        try {
          assert.equal((await second.as(account).AuthRpc.getSession()).user._id, account.user._id);
        } finally {
          await second.close();
        }
      } finally {
        rmSync(dataDir, { recursive: true, force: true });
      }
    },
  );

  it('a migration that fails leaves nothing behind and runs again at the next start', async () => {
    let failing = true;
    class Migration20990101000000_half extends Migration {
      override up(): void {
        this.addSql('create table "half_done" ("id" int primary key)');
        if (failing) this.addSql('select * from "no_such_table"');
      }
    }
    const half = definePlugin({
      id: 'half',
      group: 'HalfRpc',
      coreVersion: '^2.0.0',
      operations: { ping: defineOperation({ access: 'user', describe: 'A harmless operation.', params: v.object({}), handler: () => 'pong' }) },
      migrations: [Migration20990101000000_half],
    });
    const dataDir = mkdtempSync(path.join(tmpdir(), 'rpc-half-'));
    const scratch = TEST_DATABASE_URL ? await createScratchDatabase(TEST_DATABASE_URL) : undefined;
    const start = () => startTestApp({ dataDir, persistent: true, databaseUrl: scratch?.url, extraPlugins: [half] });
    const state = async (app: TestApp) => ({
      table: (await app.app.deps.db.execute<{ present: boolean }>(`select to_regclass('half_done') is not null as present`))[0]!.present,
      recorded: (await app.app.deps.db.execute(`select 1 from core_migrations where name = 'half:Migration20990101000000_half'`)).length,
    });
    try {
      await assert.rejects(start(), /no_such_table/);
      const after = await startTestApp({ dataDir, persistent: true, databaseUrl: scratch?.url });
      try {
        assert.deepEqual(await state(after), { table: false, recorded: 0 });
      } finally {
        await after.close();
      }
      failing = false;
      const fixed = await start();
      try {
        assert.deepEqual(await state(fixed), { table: true, recorded: 1 });
      } finally {
        await fixed.close();
      }
    } finally {
      await scratch?.drop();
      rmSync(dataDir, { recursive: true, force: true });
    }
  });
});
