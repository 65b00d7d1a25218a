import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { startTestApp, type TestApp } from '../support/harness.ts';

describe('GET /api/rpc', () => {
  let t: TestApp;
  before(async () => {
    t = await startTestApp();
  });
  after(() => t.close());

  it('lists every operation with its access, kind, description, params and result schemas', async () => {
    const response = await fetch(`${t.url}/api/rpc`);
    assert.equal(response.status, 200);
    assert.ok(response.headers.get('x-request-id'));
    const { success, data } = await response.json();
    assert.equal(success, true);
    const methods = data.operations.map((operation: { method: string }) => operation.method);
    assert.deepEqual(
      methods,
      t.app.registry.all().map((operation) => operation.method),
    );
    for (const expected of [
      'ApiKeyRpc.create',
      'ApiKeyRpc.delete',
      'ApiKeyRpc.getData',
      'ApiKeyRpc.update',
      'AuthRpc.getClientConfig',
      'AuthRpc.getSession',
      'AuthRpc.login',
      'AuthRpc.logout',
      'AuthRpc.signup',
      'NoteRpc.add',
    ]) {
      assert.ok(methods.includes(expected), expected);
    }
    for (const operation of data.operations) {
      assert.ok(['public', 'user', 'staff', 'admin'].includes(operation.access), operation.method);
      assert.equal(typeof operation.description, 'string');
      assert.ok(operation.description.length > 0, operation.method);
      assert.equal(operation.params.type, 'object', operation.method);
    }
    // Every built-in operation (and the example plugin's) declares what it answers and whether it writes.
    const undeclared = t.app.registry
      .all()
      .filter((operation) => !operation.result || !operation.kind)
      .map((operation) => operation.method);
    assert.deepEqual(undeclared, [], 'operations without a declared result or kind');
    for (const operation of data.operations) {
      assert.ok(['read', 'write'].includes(operation.kind), operation.method);
      assert.equal(typeof operation.result, 'object', operation.method);
    }
    const getData = data.operations.find((operation: { method: string }) => operation.method === 'ApiKeyRpc.getData');
    assert.equal(getData.kind, 'read');
    assert.equal(getData.result.type, 'object');
    assert.deepEqual(Object.keys(getData.result.properties).sort(), ['data', 'totalCount']);
    const create = data.operations.find((operation: { method: string }) => operation.method === 'ApiKeyRpc.create');
    assert.equal(create.access, 'user');
    assert.deepEqual(create.params.required, ['description']);
    assert.deepEqual(create.params.properties.description, { type: 'string', minLength: 1, maxLength: 500 });
    const signup = data.operations.find((operation: { method: string }) => operation.method === 'AuthRpc.signup');
    assert.equal(signup.access, 'public');
    assert.deepEqual(signup.params.required.sort(), ['email', 'username']);
    assert.equal(signup.params.properties.password.minLength, 8);
    assert.equal(signup.params.properties.email.format, 'email');
  });
});
