import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { RpcError } from 'rpc-service/plugin';
import { startTestApp, type TestApp } from '../support/harness.ts';

/** The in-process caller: the dispatcher's path without HTTP, for cheap unit-level tests and jobs. */
describe('in-process caller', () => {
  let t: TestApp;
  let owner: Awaited<ReturnType<TestApp['signup']>>;
  before(async () => {
    t = await startTestApp({ plugins: ['notes', 'auth'] });
    owner = await t.signup();
  });
  after(() => t.close());

  const principal = (role: 'admin' | 'user' = 'admin') => ({
    subscriptionId: owner.subscriptionId,
    userId: owner.user._id,
    role,
    apiKeyId: null,
    sessionId: null,
    initialContext: { projectId: 'p1' },
  });

  it('calls an operation as a principal and answers its data', async () => {
    const caller = t.app.createCaller(principal());
    const note = await caller.call<any>('NoteRpc.add', { text: '  in process  ' });
    assert.equal(note.text, 'in process');
    const listed = await t.ok('NoteRpc.list', {}, { token: owner.token });
    assert.deepEqual(
      listed.data.map((item: { _id: string }) => item._id),
      [note._id],
    );
    assert.deepEqual(await caller.call('NoteRpc.whoAmI'), {
      subscriptionId: owner.subscriptionId,
      userId: owner.user._id,
      role: 'admin',
      apiKeyId: null,
      projectId: 'p1',
      extra: { projectId: 'p1' },
    });
  });

  it('rejects with the RpcError the endpoint would answer', async () => {
    const caller = t.app.createCaller(principal('user'));
    const codeOf = (promise: Promise<unknown>) =>
      promise.then(
        () => 'OK',
        (error: unknown) => (error instanceof RpcError ? error.code : String(error)),
      );
    assert.equal(await codeOf(caller.call('NoteRpc.add', { text: '' })), 'VALIDATION_ERROR');
    assert.equal(await codeOf(caller.call('NoteRpc.nothing')), 'METHOD_NOT_FOUND');
    assert.equal(await codeOf(caller.call('NoteRpc.remove', { _id: '00000000-0000-4000-8000-000000000000' })), 'NOT_FOUND');
    assert.equal(await codeOf(t.app.createCaller(null).call('NoteRpc.list')), 'UNAUTHENTICATED');
  });

  it('runs public operations anonymously and keeps the cookies they set', async () => {
    const caller = t.app.createCaller(null);
    const session = await caller.call<any>('AuthRpc.login', { identifier: owner.user.username, password: owner.password });
    assert.equal(caller.cookies.get('session'), session.token);
  });
});
