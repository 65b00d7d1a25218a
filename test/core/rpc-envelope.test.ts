import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import * as v from 'valibot';
import { strictParams } from '../../core/rpc/registry.ts';
import { probePlugin } from '../fixtures/probe-plugin.ts';
import { startTestApp, type TestApp } from '../support/harness.ts';
import { addUser } from '../support/users.ts';

describe('RPC envelope and errors', () => {
  let t: TestApp;
  let admin: Awaited<ReturnType<TestApp['signup']>>;

  before(async () => {
    t = await startTestApp({ extraPlugins: [probePlugin], env: { LOGIN_FAILURE_LIMIT: '3', BODY_LIMIT_BYTES: '4096' } });
    admin = await t.signup();
  });
  after(() => t.close());

  const post = (body: string, headers: Record<string, string> = { 'content-type': 'application/json' }) =>
    fetch(`${t.url}/api/rpc`, { method: 'POST', headers: { authorization: `Bearer ${admin.token}`, ...headers }, body });

  it('answers success as {success: true, data}', async () => {
    const response = await t.call('ProbeRpc.nested', { person: { name: 'Ann', age: 3 }, tags: [], mode: 'a' }, { token: admin.token });
    assert.equal(response.status, 200);
    assert.deepEqual(response.body, { success: true, data: { person: { name: 'Ann', age: 3 }, tags: [], mode: 'a' } });
    assert.match(response.headers.get('content-type')!, /^application\/json/);
  });

  it('supports the documented variants without data', async () => {
    assert.deepEqual((await t.call('ProbeRpc.bare', {}, { token: admin.token })).body, { success: true });
    assert.deepEqual((await t.call('ProbeRpc.withMessage', {}, { token: admin.token })).body, { success: true, message: 'done' });
  });

  it('treats missing params as {}', async () => {
    const response = await post(JSON.stringify({ method: 'ProbeRpc.bare' }));
    assert.equal(response.status, 200);
    assert.deepEqual(await response.json(), { success: true });
  });

  it('answers BAD_REQUEST for malformed JSON, a missing method and non-object params', async () => {
    for (const body of [
      '{"method": ',
      '[]',
      '"text"',
      '{}',
      '{"method": 5}',
      '{"method":"ProbeRpc.bare","params":[1]}',
      '{"method":"ProbeRpc.bare","params":"x"}',
    ]) {
      const response = await post(body);
      assert.equal(response.status, 400, body);
      const json = await response.json();
      assert.equal(json.success, false);
      assert.equal(json.data.code, 'BAD_REQUEST', body);
      assert.equal(typeof json.data.error, 'string');
    }
  });

  it('requires a JSON content type', async () => {
    const response = await post(JSON.stringify({ method: 'ProbeRpc.bare' }), { 'content-type': 'text/plain' });
    assert.equal(response.status, 400);
    assert.match((await response.json()).data.error, /Content-Type/);
  });

  it('answers PAYLOAD_TOO_LARGE past the body limit', async () => {
    const response = await post(JSON.stringify({ method: 'ProbeRpc.bare', params: { blob: 'x'.repeat(5000) } }));
    assert.equal(response.status, 413);
    assert.equal((await response.json()).data.code, 'PAYLOAD_TOO_LARGE');
  });

  it('answers METHOD_NOT_FOUND for unknown methods', async () => {
    for (const method of ['ProbeRpc.nope', 'NopeRpc.bare', 'nonsense']) {
      const response = await t.call(method, {}, { token: admin.token });
      assert.equal(response.status, 404);
      assert.deepEqual(response.body, { success: false, data: { error: `Unknown method ${method}`, code: 'METHOD_NOT_FOUND' } });
    }
  });

  it('answers VALIDATION_ERROR naming every bad field, nested ones by path', async () => {
    const response = await t.call('ProbeRpc.nested', { person: { name: '', age: 'old' }, tags: [1], mode: 'c' }, { token: admin.token });
    assert.equal(response.status, 400);
    assert.equal(response.body.data.code, 'VALIDATION_ERROR');
    const paths = response.body.data.issues.map((issue: { path: string }) => issue.path).sort();
    assert.deepEqual(paths, ['mode', 'person.age', 'person.name', 'tags.0']);
    assert.match(response.body.data.error, /person\.name: name must not be empty/);
    const missing = await t.call('ProbeRpc.nested', {}, { token: admin.token });
    assert.deepEqual(missing.body.data.issues.map((issue: { path: string }) => issue.path).sort(), ['mode', 'person', 'tags']);
  });

  it('refuses unknown params with VALIDATION_ERROR naming each, nested ones by path, changing nothing; records stay open', async () => {
    const byAdmin = { token: admin.token };
    const keys = async () => (await t.ok('ApiKeyRpc.getData', {}, byAdmin)).totalCount;
    const before = await keys();
    const typo = await t.call('ApiKeyRpc.create', { description: 'typo', secret: 'mine', scope: ['NoteRpc'] }, byAdmin);
    assert.deepEqual([typo.status, typo.body.data.code], [400, 'VALIDATION_ERROR']);
    assert.deepEqual(typo.body.data.issues, [
      { path: 'secret', message: 'Received unknown parameter: secret' },
      { path: 'scope', message: 'Received unknown parameter: scope' },
    ]);
    assert.equal(typo.body.data.error, 'Invalid params: secret: Received unknown parameter: secret; scope: Received unknown parameter: scope');
    assert.equal(await keys(), before, 'nothing was created');

    // Beside the other issues, and inside nested objects.
    const nested = await t.call('ProbeRpc.nested', { person: { name: 'Ann', age: 'old', nick: 'A' }, tags: [], mode: 'a' }, byAdmin);
    assert.deepEqual(nested.body.data.issues.map((issue: { path: string }) => issue.path).sort(), ['person.age', 'person.nick']);
    // A record's keys are the caller's own: metadata takes any, while the memory beside it takes only its fields.
    const memory = (fields: object) => t.call('MemoryRpc.saveMemory', { scope: 'user', memory: { content: 'Deploys on Tuesday.', ...fields } }, byAdmin);
    assert.equal((await memory({ metadata: { team: 'ops', anything: { at: 'all' } } })).status, 200);
    assert.deepEqual((await memory({ colour: 'red' })).body.data.issues, [{ path: 'memory.colour', message: 'Received unknown parameter: colour' }]);

    // The in-process caller refuses alike.
    const caller = t.app.createCaller({
      subscriptionId: admin.subscriptionId,
      userId: admin.user._id,
      role: 'admin',
      apiKeyId: null,
      sessionId: null,
      initialContext: {},
    });
    await assert.rejects(caller.call('ApiKeyRpc.create', { description: 'in process', secret: 'mine' }), (error: { code: string; issues: unknown }) => {
      assert.equal(error.code, 'VALIDATION_ERROR');
      assert.deepEqual(error.issues, [{ path: 'secret', message: 'Received unknown parameter: secret' }]);
      return true;
    });
    assert.equal(await keys(), before);

    // GET /api/rpc says so: no property beyond those listed, at every level that declares its keys.
    const listing = await (await fetch(`${t.url}/api/rpc`)).json();
    const params = listing.data.operations.find((operation: { method: string }) => operation.method === 'MemoryRpc.saveMemory').params;
    assert.equal(params.additionalProperties, false);
    assert.equal(params.properties.memory.additionalProperties, false);
    assert.deepEqual(params.properties.memory.properties.metadata.additionalProperties, {});
  });

  it('answers UNAUTHENTICATED without a credential', async () => {
    const response = await t.call('ProbeRpc.bare');
    assert.equal(response.status, 401);
    assert.equal(response.body.data.code, 'UNAUTHENTICATED');
  });

  it('answers FORBIDDEN when the role does not allow the operation', async () => {
    const user = await addUser(t, admin.subscriptionId, 'user');
    const staff = await addUser(t, admin.subscriptionId, 'staff');
    assert.equal((await t.call('ProbeRpc.adminOnly', {}, { token: user.token })).status, 403);
    assert.equal((await t.call('ProbeRpc.adminOnly', {}, { token: staff.token })).status, 403);
    assert.equal((await t.call('ProbeRpc.staffOnly', {}, { token: user.token })).body.data.code, 'FORBIDDEN');
    assert.equal(await t.ok('ProbeRpc.staffOnly', {}, { token: staff.token }), 'staff ok');
    assert.equal(await t.ok('ProbeRpc.staffOnly', {}, { token: admin.token }), 'staff ok');
    assert.equal(await t.ok('ProbeRpc.adminOnly', {}, { token: admin.token }), 'admin ok');
  });

  it('answers NOT_FOUND for a record that does not exist', async () => {
    const response = await t.call('NoteRpc.remove', { _id: '11111111-1111-4111-8111-111111111111' }, { token: admin.token });
    assert.equal(response.status, 404);
    assert.equal(response.body.data.code, 'NOT_FOUND');
  });

  it('answers CONFLICT for a duplicate', async () => {
    const response = await t.call('AuthRpc.signup', { email: admin.user.email, username: 'someone-else', password: 'long enough pw' });
    assert.equal(response.status, 409);
    assert.equal(response.body.data.code, 'CONFLICT');
  });

  it('answers RATE_LIMITED with Retry-After after repeated failed logins, even for the right password', async () => {
    const victim = await t.signup();
    for (let attempt = 0; attempt < 3; attempt++) {
      const wrong = await t.call('AuthRpc.login', { identifier: victim.user.username, password: 'wrong password' });
      assert.equal(wrong.status, 401);
    }
    const limited = await t.call('AuthRpc.login', { identifier: victim.user.username, password: victim.password });
    assert.equal(limited.status, 429);
    assert.equal(limited.body.data.code, 'RATE_LIMITED');
    const retryAfter = Number(limited.headers.get('retry-after'));
    assert.ok(retryAfter > 0 && retryAfter <= 900, String(retryAfter));
  });

  it('takes the keys of every object of an intersection: each is declared by one of them', () => {
    const both = strictParams(v.intersect([v.object({ name: v.string() }), v.object({ age: v.number() })]));
    const parsed = v.safeParse(both, { name: 'Ann', age: 3 });
    assert.deepEqual([parsed.success, parsed.issues?.map((issue) => issue.message)], [true, undefined]);
    assert.deepEqual(parsed.output, { name: 'Ann', age: 3 });
  });

  it('answers FEATURE_UNAVAILABLE with 503', async () => {
    const response = await t.call('ProbeRpc.unavailable', {}, { token: admin.token });
    assert.equal(response.status, 503);
    assert.deepEqual(response.body.data, { error: 'Telephony is not configured', code: 'FEATURE_UNAVAILABLE' });
  });

  it('answers INTERNAL with a generic message and an error id, keeping details in the log', async () => {
    const response = await t.call('ProbeRpc.boom', {}, { token: admin.token });
    assert.equal(response.status, 500);
    const { errorId, error, code } = response.body.data;
    assert.equal(code, 'INTERNAL');
    assert.match(errorId, /^[0-9a-f-]{36}$/);
    assert.equal(error, `Internal error (error id ${errorId})`);
    assert.ok(!JSON.stringify(response.body).includes('hunter2'));
    const line = t.logs.find((entry) => entry.includes(errorId) && entry.includes('"err"'));
    assert.ok(line, 'the log has the error with its id');
    assert.match(line!, /Error: database password hunter2/);
  });

  it('answers INTERNAL for a result outside the declared schema (CHECK_RESULTS, on in tests), naming the issues in the log only', async () => {
    const response = await t.call('ProbeRpc.liar', {}, { token: admin.token });
    assert.equal(response.status, 500);
    assert.equal(response.body.data.code, 'INTERNAL');
    assert.ok(!JSON.stringify(response.body).includes('one'));
    const line = t.logs.find((entry) => entry.includes(response.body.data.errorId) && entry.includes('"err"'));
    assert.match(line ?? '', /ProbeRpc\.liar answered outside its declared result: n: Invalid type: Expected number but received \\"one\\"/);
    const unchecked = await startTestApp({ extraPlugins: [probePlugin], plugins: ['probe', 'auth'], withNotes: false, env: { CHECK_RESULTS: 'false' } });
    try {
      const member = await unchecked.signup();
      assert.deepEqual(await unchecked.ok('ProbeRpc.liar', {}, { token: member.token }), { n: 'one' });
    } finally {
      await unchecked.close();
    }
  });

  it('carries X-Request-Id on every answer, keeping a well-formed one from the caller', async () => {
    const generated = await t.call('ProbeRpc.bare', {}, { token: admin.token });
    assert.match(generated.headers.get('x-request-id')!, /^[0-9a-f-]{36}$/);
    const kept = await t.call('ProbeRpc.nope', {}, { token: admin.token, headers: { 'x-request-id': 'trace-123' } });
    assert.equal(kept.headers.get('x-request-id'), 'trace-123');
  });

  it('ignores a stale credential on public operations', async () => {
    const response = await t.call('AuthRpc.getClientConfig', {}, { token: 'stale-token' });
    assert.equal(response.status, 200);
    assert.equal(response.body.data.signupMode, 'open');
  });
});
