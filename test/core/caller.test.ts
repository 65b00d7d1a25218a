import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { RpcError } from 'rpc-service/plugin';
import { refused } from '../support/caller.ts';
import { startTestApp, type Session, type TestApp } from '../support/harness.ts';

/** The in-process caller: the dispatcher's path without HTTP, for cheap unit-level tests and jobs. */
describe('in-process caller', () => {
  let t: TestApp;
  let owner: Session;
  before(async () => {
    t = await startTestApp({ plugins: ['notes', 'auth', 'api-key'] });
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
    const note = await caller.call<{ _id: string; text: string }>('NoteRpc.add', { text: '  in process  ' });
    assert.equal(note.text, 'in process');
    const listed = await t.ok<{ data: { _id: string }[] }>('NoteRpc.list', {}, { token: owner.token });
    assert.deepEqual(
      listed.data.map((item) => item._id),
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
    const session = await caller.call<{ token: string }>('AuthRpc.login', { identifier: owner.user.username, password: owner.password });
    assert.equal(caller.cookies.get('session'), session.token);
  });

  it('authenticates credentials at each call, as the endpoint does', async () => {
    const session = await t.as(null).AuthRpc.login({ identifier: owner.user.username, password: owner.password });
    const caller = t.app.createCaller({ credentials: { sessionToken: session.token } });
    assert.equal((await caller.call<{ userId: string }>('NoteRpc.whoAmI')).userId, owner.user._id);
    await caller.call('AuthRpc.logout');
    await refused(caller.call('NoteRpc.whoAmI'), 'UNAUTHENTICATED');
    await refused(t.as({ token: 'not-a-session' }).call('NoteRpc.list'), 'UNAUTHENTICATED');

    const key = await t.as(owner).ApiKeyRpc.create({ description: 'notes only', scopes: ['NoteRpc'] });
    const viaKey = t.as({ apiKey: key.fullKey });
    assert.equal((await viaKey.call<{ apiKeyId: string }>('NoteRpc.whoAmI')).apiKeyId, key._id);
    const refusal = await refused(viaKey.ApiKeyRpc.getData(), 'FORBIDDEN');
    assert.match(refusal.message, /its scopes are NoteRpc/);
  });

  it('answers the typed operations with what a client reads: the JSON of the result', async () => {
    const session = await t.as(owner).AuthRpc.getSession();
    assert.equal(session.user._id, owner.user._id);
    assert.equal(typeof session.user.createdAt, 'string');
    // @ts-expect-error params outside the operation's declared params are a type error, and refused as they would be over HTTP
    const refusal = await refused(t.as(owner).ApiKeyRpc.create({ scopes: ['NoteRpc'] }), 'VALIDATION_ERROR');
    assert.deepEqual(
      refusal.issues?.map((issue) => issue.path),
      ['description'],
    );
  });
});
