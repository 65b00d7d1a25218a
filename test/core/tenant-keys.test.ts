import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { checkStatements, numberedPlaceholders, parserReady, unkeyedTables } from '../tenant-keys/check.ts';
import { ALLOW_LIST } from '../tenant-keys/allow-list.ts';

/** The tenant-key check (test/tenant-keys/check.ts) on statements written here, so it cannot pass everything unseen. */
const TENANTS = new Map([
  ['task', 'subscription_id'],
  ['auth_user', 'subscription_id'],
  ['auth_session', 'subscription_id'],
  ['core_file', 'subscription_id'],
  ['core_upload_key', 'subscription_id'],
  ['scheduler_task', 'subscription_id'],
  ['auth_subscription', 'id'],
]);

describe('the tenant-key check', () => {
  const unkeyed = async (sql: string) => {
    await parserReady();
    return unkeyedTables(sql, TENANTS);
  };

  it('numbers ? placeholders, leaving quoted text, \\? and comments alone', () => {
    assert.equal(
      numberedPlaceholders(`select '?', "a?" from t where a = ? and b \\? 'k' -- ?\n and c = ?`),
      `select '?', "a?" from t where a = $1 and b ? 'k' -- ?\n and c = $2`,
    );
  });

  it('passes statements keyed by subscription_id', async () => {
    for (const sql of [
      'select * from task where subscription_id = ? and id = ?',
      'select "t0".* from "task" as "t0" where "t0"."subscription_id" = ? and "t0"."id" in (?, ?)',
      'select * from task where subscription_id = any(?::uuid[])',
      'select t.id from task t join auth_user u on u.subscription_id = t.subscription_id and u.id = t.created_by where t.subscription_id = ?',
      'select t.id, (select count(*) from task c where c.subscription_id = t.subscription_id and c.parent_id = t.id) from task t where t.subscription_id = ?',
      'with mine as (select id, subscription_id from task where subscription_id = ? for update skip locked) update task set title = ? from mine where task.subscription_id = mine.subscription_id and task.id = mine.id returning task.id',
      'insert into task (id, subscription_id, title) values (?, ?, ?) on conflict (subscription_id, id) do update set title = excluded.title returning *',
      "select id from task where subscription_id = ? and metadata \\? 'k' and tags @> ?::jsonb",
      "select id from task where subscription_id = $1 and metadata ? 'k'",
      'delete from core_file f using core_upload_key k where k.subscription_id = ? and f.subscription_id = k.subscription_id and f.upload_key_id = k.id',
      'update scheduler_task set next_run = v.next_run from unnest(?::uuid[], ?::uuid[], ?::timestamptz[]) as v(subscription_id, id, next_run) where scheduler_task.subscription_id = v.subscription_id and scheduler_task.id = v.id',
      'select name from auth_subscription where id = ?',
      'select 1 from core_migrations where name = ?',
      'create index on task (subscription_id)',
    ])
      assert.deepEqual(await unkeyed(sql), [], sql);
  });

  it('flags a tenant table reached without its key, wherever it is', async () => {
    const cases: [string, string[]][] = [
      ['select * from task where id = ?', ['task']],
      ['select * from task where subscription_id = ? or id = ?', ['task']],
      ['select t.id from task t join auth_user u on u.id = t.created_by where t.subscription_id = ?', ['auth_user']],
      ['select * from task where subscription_id = ? and created_by in (select id from auth_user where email = ?)', ['auth_user']],
      ['with recent as (select id from task where created_at > ?) select * from recent', ['task']],
      ['update task set title = ? where id = ?', ['task']],
      ['delete from task where subscription_id = ? and id in (select id from task where parent_id = ?)', ['task']],
      ['insert into task (id, title) values (?, ?)', ['task']],
      ['insert into task (id, subscription_id, title) select id, subscription_id, title from task where id = ?', ['task']],
      ['select count(*) from auth_subscription', ['auth_subscription']],
    ];
    for (const [sql, tables] of cases) assert.deepEqual(await unkeyed(sql), tables, sql);
  });

  it('fails on a violation the allow-list does not cover, and passes one it does, with its reason', async () => {
    const report = await checkStatements(
      [
        { sql: 'select * from task where id = ?' },
        { sql: 'select subscription_id, id, password_hash, is_active from auth_user where lower(email) = lower(?) or lower(username) = lower(?) limit 1' },
        { sql: 'update "task" set "title" = ?, "updated_at" = ? where "id" = ?' },
        { sql: 'update "task" set "title" = ?, "updated_at" = ? where "subscription_id" = ? and "id" = ?' },
        { sql: 'select * from task', origin: 'test' },
        { sql: 'select * from task where subscription_id = ?' },
        { sql: 'select from where' },
      ],
      TENANTS,
      ALLOW_LIST,
    );
    assert.deepEqual(
      report.failures.map((failure) => failure.sql),
      ['select * from task where id = ?', 'update "task" set "title" = ?, "updated_at" = ? where "id" = ?', 'select from where'],
    );
    assert.match(report.failures[2]!.error!, /not parsed/);
    assert.deepEqual(
      report.allowed.map(({ entry }) => entry.reason.split(' ').slice(0, 2).join(' ')),
      ['login looks'],
    );
    assert.deepEqual(report.skipped, { test: 1 });
  });
});
