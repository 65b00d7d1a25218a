import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { after, before, describe, it } from 'node:test';
import * as v from 'valibot';
import type { Database } from 'rpc-service/plugin';
import { definePlugin } from '../../core/plugin/define.ts';
import { defineOperation } from '../../core/rpc/operation.ts';
import { startTestApp, uniqueName, type RpcResponse, type TestApp } from '../support/harness.ts';
import { logLines } from '../support/wire.ts';

/**
 * Input that must never reach the database (NUL characters, malformed
 * filters), and database errors that must never put values into the log.
 */

const NUL = '\u0000';

/** The last database error the probe saw, to log it again in other shapes. */
let lastDatabaseError: unknown;

/** Operations that send their param to PostgreSQL where it fails: through the ORM (a DriverException) and through raw SQL. */
const probePlugin = definePlugin({
  id: 'db-error-probe',
  group: 'DbErrorProbeRpc',
  coreVersion: '^2.0.0',
  deps: ['db'],
  operations: {
    // Not JSON: PostgreSQL quotes the value in its message, its detail and its context.
    parseJson: defineOperation<v.GenericSchema, 'user', { db: Database }>({
      access: 'user',
      describe: 'Casts its value to jsonb through the ORM.',
      params: v.object({ value: v.string() }),
      handler: async ({ params, ctx }) => {
        try {
          return await ctx.em.execute('select ?::jsonb as value', [(params as { value: string }).value]);
        } catch (error) {
          lastDatabaseError = error;
          throw error;
        }
      },
    }),
    parseInteger: defineOperation<v.GenericSchema, 'user', { db: Database }>({
      access: 'user',
      describe: 'Casts its value to an integer with raw SQL.',
      params: v.object({ value: v.string() }),
      handler: ({ params, deps }) => deps.db.execute('select ?::integer as value', [(params as { value: string }).value]),
    }),
  },
});

const assertRefused = (response: RpcResponse, path: string) => {
  assert.equal(response.status, 400, JSON.stringify(response.body));
  assert.equal(response.body.data.code, 'VALIDATION_ERROR');
  const paths = (response.body.data.issues as { path: string }[]).map((issue) => issue.path);
  assert.ok(paths.includes(path), `issues name ${path}: ${JSON.stringify(response.body.data.issues)}`);
};

describe('input hardening', () => {
  let t: TestApp;
  let owner: Awaited<ReturnType<TestApp['signup']>>;
  before(async () => {
    t = await startTestApp({ extraPlugins: [probePlugin] });
    owner = await t.signup();
  });
  after(() => t?.close());

  const admin = () => ({ token: owner.token });

  describe('a NUL character is a VALIDATION_ERROR naming the field, and nothing is stored', () => {
    it('in the login identifier, anonymously', async () => {
      assertRefused(await t.call('AuthRpc.login', { identifier: `a${NUL}`, password: 'x' }), 'identifier');
      assertRefused(await t.call('AuthRpc.login', { identifier: owner.user.username, password: `${owner.password}${NUL}` }), 'password');
    });

    it('in signup fields', async () => {
      for (const field of ['username', 'email', 'firstName', 'lastName', 'password']) {
        const name = uniqueName('nul');
        const params: Record<string, string> = { email: `${name}@example.com`, username: name, password: 'a long password', firstName: 'Ann', lastName: 'Lee' };
        params[field] = `${params[field]}${NUL}`;
        assertRefused(await t.call('AuthRpc.signup', params), field);
        // The name is still free: no user was created.
        await t.ok('AuthRpc.preSignupValidate', { email: `${name}@example.com`, username: name });
      }
    });

    it('in an API key description or its initial context (also when escaped inside the JSON text)', async () => {
      const before = await t.ok('ApiKeyRpc.getData', {}, admin());
      assertRefused(await t.call('ApiKeyRpc.create', { description: `key${NUL}` }, admin()), 'description');
      assertRefused(await t.call('ApiKeyRpc.create', { description: 'key', initialContext: '{"projectId": "p\\u0000"}' }, admin()), 'initialContext');
      assert.deepEqual(await t.ok('ApiKeyRpc.getData', {}, admin()), before);
    });

    it('in profile fields', async () => {
      await t.ok('UserProfileRpc.updateUserProfile', { jobTitle: 'Engineer' }, admin());
      for (const field of ['firstName', 'lastName', 'jobTitle', 'department']) {
        assertRefused(await t.call('UserProfileRpc.updateUserProfile', { [field]: `x${NUL}y` }, admin()), field);
      }
      const profile = await t.ok('UserProfileRpc.getUserProfile', {}, admin());
      assert.equal(profile.jobTitle, 'Engineer');
      assert.equal(profile.department ?? null, null);
    });

    it('in admin user fields, at any depth and in keys', async () => {
      const name = uniqueName('nul');
      const created = { email: `${name}@example.com`, username: name, password: 'a long password', role: 'user' };
      assertRefused(await t.call('AdminUserRpc.create', { ...created, firstName: `A${NUL}` }, admin()), 'firstName');
      assertRefused(await t.call('AdminUserRpc.create', { ...created, partnerContactId: NUL }, admin()), 'partnerContactId');
      assertRefused(
        await t.call('AdminUserRpc.create', { ...created, oauthProfiles: [{ provider: 'acme', id: '1', [`extra${NUL}`]: true }] }, admin()),
        'oauthProfiles.0.extra\\u0000',
      );
      assertRefused(await t.call('AdminUserRpc.create', { ...created, oauthProfiles: [{ provider: 'acme', id: `1${NUL}` }] }, admin()), 'oauthProfiles.0.id');
      assertRefused(await t.call('AdminUserRpc.update', { _id: owner.user._id, lastName: `L${NUL}` }, admin()), 'lastName');
      assertRefused(await t.call('AdminUserRpc.getData', { filter: { username: { $in: ['a', `b${NUL}`] } } }, admin()), 'filter.username.$in.1');
      const listed = await t.ok('AdminUserRpc.getData', { filter: { username: name } }, admin());
      assert.equal(listed.totalDocs, 0);
      assert.equal((await t.ok('AdminUserRpc.findById', { id: owner.user._id }, admin())).lastName, null);
    });

    it('even in params the operation does not declare', async () => {
      assertRefused(await t.call('AuthRpc.getClientConfig', { ignored: { deeper: [NUL] } }), 'ignored.deeper.0');
    });
  });

  it('refuses half of a surrogate pair (ill-formed Unicode) in a string or key, naming where, and keeps whole pairs', async () => {
    const lone = JSON.parse('"broken \\ud800 text"') as string;
    assertRefused(await t.call('ApiKeyRpc.create', { description: lone }, admin()), 'description');
    assertRefused(await t.call('AuthRpc.getClientConfig', { ignored: { [JSON.parse('"k\\udc00"')]: 1 } }), `ignored.${JSON.parse('"k\\udc00"')}`);
    const key = await t.ok('ApiKeyRpc.create', { description: 'emoji 🙂 stays' }, admin());
    assert.equal(key.description, 'emoji 🙂 stays');
  });

  it('refuses params nested deeper than the limit, naming where', async () => {
    let nested: unknown = 'leaf';
    for (let level = 0; level < 200; level++) nested = { a: nested };
    const response = await t.call('AdminUserRpc.getData', { filter: nested }, admin());
    assert.equal(response.status, 400);
    assert.equal(response.body.data.code, 'VALIDATION_ERROR');
    assert.match(response.body.data.issues[0].path, /^filter(\.a)+$/);
  });

  describe('malformed list filters are a VALIDATION_ERROR naming the field', () => {
    const refusedFilters: [string, unknown, string][] = [
      ['an unbalanced bracket', { email: { $regex: '[' } }, 'filter.email.$regex'],
      ['a dangling quantifier', { email: { $regex: 'a**' } }, 'filter.email.$regex'],
      ['a $regex that is not a string', { email: { $regex: 42 } }, 'filter.email.$regex'],
      ['a $regex on a UUID field', { _id: { $regex: 'a' } }, 'filter._id.$regex'],
      ['an unknown option', { email: { $regex: 'a', $options: 'gx' } }, 'filter.email.$options'],
      ['an unknown field operator', { email: { $where: 'sleep(1)' } }, 'filter.email.$where'],
      ['an unknown top-level operator', { $nor: [{ email: 'a' }] }, 'filter.$nor'],
      ['$in that is not an array', { email: { $in: 'a' } }, 'filter.email.$in'],
      ['$exists that is not a boolean', { email: { $exists: 'yes' } }, 'filter.email.$exists'],
      ['$and that is not an array', { $and: { email: 'a' } }, 'filter.$and'],
      ['an object where a value goes', { email: { $eq: { nested: true } } }, 'filter.email.$eq'],
      ['a date PostgreSQL cannot store', { createdAt: { $gt: '-271821-04-20T00:00:00Z' } }, 'filter.createdAt.$gt'],
      ['an unknown field', { passwordHash: 'x' }, 'filter.passwordHash'],
      ['an inherited name', { toString: 'x' }, 'filter.toString'],
    ];
    for (const [name, filter, path] of refusedFilters) {
      it(name, async () => assertRefused(await t.call('AdminUserRpc.getData', { filter }, admin()), path));
    }

    it('a pattern JavaScript accepts and PostgreSQL refuses', async () => {
      for (const pattern of ['(?<name>a)', '\\p{L}', 'a{1,300}']) {
        assertRefused(await t.call('AdminUserRpc.getData', { filter: { email: { $regex: pattern } } }, admin()), 'filter');
      }
    });

    it('an inherited name in sort', async () => {
      assertRefused(await t.call('AdminUserRpc.getData', { sort: { valueOf: 1 } }, admin()), 'sort.valueOf');
    });

    it('while valid patterns still filter', async () => {
      const found = await t.ok('AdminUserRpc.getData', { filter: { username: { $regex: `^${owner.user.username.toUpperCase()}$`, $options: 'i' } } }, admin());
      assert.deepEqual(
        found.docs.map((user: { _id: string }) => user._id),
        [owner.user._id],
      );
    });
  });

  it('logs a failed statement without its values', async () => {
    const secret = `Secret-${randomBytes(12).toString('hex')}-value`;
    const key = await t.ok('ApiKeyRpc.create', { description: 'probe' }, admin());
    const logged = t.logs.length;

    const failures: RpcResponse[] = [];
    for (const method of ['DbErrorProbeRpc.parseJson', 'DbErrorProbeRpc.parseInteger']) {
      const response = await t.call(method, { value: secret }, { apiKey: key.fullKey });
      assert.equal(response.status, 500, JSON.stringify(response.body));
      failures.push(response);
    }
    // The same error logged as plain code might: as the first argument, and as the cause of another.
    t.app.logger.error(lastDatabaseError);
    t.app.logger.warn({ err: new Error('wrapped', { cause: lastDatabaseError }) }, 'a wrapped database error');

    const lines = t.logs.slice(logged);
    const text = lines.join('\n');
    assert.equal(text.includes(secret), false, `the log holds the secret:\n${text}`);
    assert.equal(text.includes(secret.slice(7, 31)), false, 'the log holds part of the secret');

    // Still useful: the code, the statement's shape and the database's reason are there.
    const entries = logLines(lines);
    for (const [index, cast] of [
      [0, 'jsonb'],
      [1, 'integer'],
    ] as const) {
      const entry = entries.find((line) => line.msg === 'operation failed' && line.errorId === failures[index]!.body.data.errorId);
      assert.ok(entry?.err, `the failure of ${cast} is logged`);
      assert.equal(entry.err.code, '22P02');
      assert.match(entry.err.message, new RegExp(`^select \\?::${cast} as value - invalid input syntax for type ${cast === 'jsonb' ? 'json' : 'integer'}`));
      assert.match(entry.err.stack, /\n\s+at /);
    }
    assert.ok(
      entries.some((line) => line.msg.startsWith('select ?::jsonb as value - ')),
      'an error logged alone is its own message, without values',
    );
    assert.ok(entries.some((line) => line.msg === 'a wrapped database error' && line.err?.cause?.code === '22P02'));
  });
});
