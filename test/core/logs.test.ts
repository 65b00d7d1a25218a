import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import * as v from 'valibot';
import { definePlugin } from '../../core/plugin/define.ts';
import { defineOperation } from '../../core/rpc/operation.ts';
import { startTestApp, TEST_MASTER_KEY, uniqueName, type CallOptions, type TestApp } from '../support/harness.ts';

const FAILURE_MESSAGE = 'deliberate failure from the log test plugin';

/** An in-process plugin with one operation that fails with a plain Error (answered as INTERNAL). */
const failingPlugin = definePlugin({
  id: 'log-probe',
  group: 'LogProbeRpc',
  coreVersion: '^2.0.0',
  operations: {
    explode: defineOperation({
      access: 'user',
      describe: 'Always throws.',
      params: v.object({ password: v.optional(v.string()) }),
      handler: () => {
        throw new Error(FAILURE_MESSAGE);
      },
    }),
  },
});

describe('logs', () => {
  let t: TestApp;
  before(async () => {
    t = await startTestApp({ extraPlugins: [failingPlugin] });
  });
  after(() => t?.close());

  it('carry request ids and never contain passwords, keys or tokens', async () => {
    const password = `Pw-${randomBytes(9).toString('hex')}-distinctive`;
    const wrongPassword = `Wrong-${randomBytes(9).toString('hex')}`;
    const username = uniqueName('logs');
    const requestIds: string[] = [];
    const call = async (method: string, params: unknown, options: CallOptions = {}) => {
      const requestId = `logs-${requestIds.length}-${randomBytes(4).toString('hex')}`;
      requestIds.push(requestId);
      const response = await t.call(method, params, { ...options, headers: { ...options.headers, 'x-request-id': requestId } });
      assert.equal(response.headers.get('x-request-id'), requestId);
      return response;
    };
    const ok = async (method: string, params: unknown, options?: CallOptions) => {
      const response = await call(method, params, options);
      assert.equal(response.status, 200, `${method}: ${JSON.stringify(response.body)}`);
      assert.equal(response.body.success, true);
      return response.body.data;
    };

    const signup = await ok('AuthRpc.signup', { email: `${username}@example.com`, username, password });
    const login = await ok('AuthRpc.login', { identifier: username, password });
    assert.equal(login.user._id, signup.user._id);
    const token: string = login.token;
    const key = await ok('ApiKeyRpc.create', { description: 'log probe' }, { token });
    const fullKey: string = key.fullKey;
    const keySecret = fullKey.slice(fullKey.indexOf('_') + 1);
    assert.equal(keySecret.length, 43);

    assert.equal((await ok('NoteRpc.whoAmI', {}, { apiKey: fullKey })).apiKeyId, key._id);
    assert.equal((await ok('AuthRpc.getSession', {}, { token })).user._id, signup.user._id);
    assert.equal((await ok('NoteRpc.whoAmI', {}, { headers: { cookie: `theme=dark; session=${token}` } })).userId, signup.user._id);
    await ok('NoteRpc.add', { text: 'hello from the log test' }, { token: signup.token });

    const wrong = await call('AuthRpc.login', { identifier: username, password: wrongPassword });
    assert.equal(wrong.status, 401);
    const forgedKey = `${key.prefix}_${'A'.repeat(43)}`;
    const forged = await call('ApiKeyRpc.getData', {}, { apiKey: forgedKey });
    assert.equal(forged.status, 401);

    const failed = await call('LogProbeRpc.explode', { password }, { apiKey: fullKey });
    assert.equal(failed.status, 500);
    assert.equal(failed.body.data.code, 'INTERNAL');
    const errorId: string = failed.body.data.errorId;
    assert.match(errorId, /^[0-9a-f-]{36}$/);

    assert.deepEqual(await ok('AuthRpc.logout', {}, { token }), { success: true });
    assert.equal((await call('AuthRpc.getSession', {}, { token })).status, 401);

    const text = t.logs.join('\n');
    const secrets: Record<string, string> = {
      password,
      'wrong password': wrongPassword,
      'full API key': fullKey,
      "API key's secret part": keySecret,
      'encrypted API key': key.encryptedKey,
      'API key hash': key.keyHash,
      'signup session token': signup.token,
      'login session token': token,
      'master key': t.databaseUrl ? TEST_MASTER_KEY : readFileSync(path.join(t.dataDir, 'master.key'), 'utf8').trim(),
    };
    for (const [name, secret] of Object.entries(secrets)) {
      assert.ok(typeof secret === 'string' && secret.length >= 16, `${name} is a real value`);
      assert.equal(text.includes(secret), false, `the logs contain the ${name}`);
    }

    // Logging did happen: every call left a line with its request id, and the failure is there with its id.
    const entries = t.logs.map((line) => JSON.parse(line) as Record<string, unknown>);
    const logged = new Set(entries.map((entry) => entry.requestId));
    for (const requestId of requestIds) assert.ok(logged.has(requestId), `no log line for request ${requestId}`);
    const failure = entries.find((entry) => entry.msg === 'operation failed' && entry.errorId === errorId);
    assert.ok(failure, 'the INTERNAL failure is logged with its error id');
    assert.equal(failure.method, 'LogProbeRpc.explode');
    assert.equal(failure.requestId, failed.headers.get('x-request-id'));
    assert.match(JSON.stringify(failure.err), new RegExp(FAILURE_MESSAGE));
    const refusedLogin = entries.find((entry) => entry.requestId === wrong.headers.get('x-request-id'));
    assert.equal(refusedLogin?.code, 'UNAUTHENTICATED');
  });
});
