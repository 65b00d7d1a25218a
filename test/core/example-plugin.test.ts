import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { routeJson, startTestApp, type TestApp } from '../support/harness.ts';
import { addUser } from '../support/users.ts';

/** What the example plugin (test/fixtures/notes-plugin) shows beside its operations: a route and a contribution typed by its deps. */
describe('the example plugin', () => {
  let t: TestApp;
  let admin: Awaited<ReturnType<TestApp['signup']>>;
  let member: Awaited<ReturnType<typeof addUser>>;

  before(async () => {
    t = await startTestApp({ plugins: ['auth', 'notes', 'workflow'] });
    admin = await t.signup();
    member = await addUser(t, admin.subscriptionId, 'user');
  });
  after(() => t.close());

  const route = (method: string, path: string, token?: string) => routeJson(t, method, path, token);

  it("serves the example plugin's route to its caller only: the caller's notes as text, 401 without credentials", async () => {
    await t.ok('NoteRpc.add', { text: 'first of mine' }, { token: member.token });
    await t.ok('NoteRpc.add', { text: "the admin's" }, { token: admin.token });
    const mine = await fetch(`${t.url}/notes/export`, { headers: { authorization: `Bearer ${member.token}` } });
    assert.equal(mine.status, 200);
    assert.match(mine.headers.get('content-type') ?? '', /^text\/plain/);
    assert.match(await mine.text(), /^\d{4}-\d\d-\d\dT[\d:.]+Z first of mine\n$/);
    assert.deepEqual(await route('GET', '/notes/export'), {
      status: 401,
      body: { success: false, data: { code: 'UNAUTHENTICATED', error: 'Authentication required: send X-API-Key or a session token' } },
    });
  });

  it('offers its notes as a collection forms pick values from, through its function-form contribution', async () => {
    const stranger = await t.signup();
    await t.ok('NoteRpc.add', { text: 'not for the others' }, { token: stranger.token });
    const values = await t.ok(
      'WorkflowRpc.getFieldValues',
      { fieldName: 'note', reference: { collection: 'notes', valueField: '_id', displayField: 'text', sort: { text: 1 } } },
      { token: member.token },
    );
    assert.deepEqual(
      values.map((value: { label: string }) => value.label),
      ['first of mine', "the admin's"],
    );
    const filtered = await t.ok(
      'WorkflowRpc.getFieldValues',
      { fieldName: 'note', reference: { collection: 'notes', valueField: 'text', displayField: 'text', filter: { userId: member.user._id } } },
      { token: member.token },
    );
    assert.deepEqual(filtered, [{ value: 'first of mine', label: 'first of mine' }]);
  });
});
