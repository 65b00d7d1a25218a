import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { startTestApp, uniqueName, type TestApp } from '../../../test/support/harness.ts';
import { addUser } from '../../../test/support/users.ts';

const USER_RECORD_FIELDS = [
  '_id',
  'createdAt',
  'email',
  'firstName',
  'isActive',
  'isPhoneVerified',
  'isVerified',
  'lastName',
  'oauthProfiles',
  'onboardingCompleted',
  'partnerContactId',
  'role',
  'serviceCode',
  'subscriptionId',
  'updatedAt',
  'username',
].sort();

describe('AdminUserRpc', () => {
  let t: TestApp;
  let admin: Awaited<ReturnType<TestApp['signup']>>;
  let otherAdmin: Awaited<ReturnType<TestApp['signup']>>;

  before(async () => {
    t = await startTestApp();
    admin = await t.signup();
    otherAdmin = await t.signup();
  });
  after(() => t.close());

  const asAdmin = { token: '' };
  const createUser = async (fields: Record<string, unknown> = {}, as = admin.token) => {
    const name = uniqueName('member');
    return t.ok('AdminUserRpc.create', { email: `${name}@example.com`, username: name, password: 'member password', role: 'user', ...fields }, { token: as });
  };

  it('is for admins only', async () => {
    const user = await addUser(t, admin.subscriptionId, 'user');
    const staff = await addUser(t, admin.subscriptionId, 'staff');
    const operations = t.app.registry.all().filter((operation) => operation.group === 'AdminUserRpc');
    assert.ok(operations.length >= 10);
    for (const { method, access } of operations) {
      assert.equal(access, 'admin', method);
      for (const token of [user.token, staff.token]) {
        const response = await t.call(method, {}, { token });
        assert.equal(response.status, 403, method);
        assert.equal(response.body.data.code, 'FORBIDDEN');
      }
    }
    asAdmin.token = admin.token;
  });

  it('creates a user who can log in, and answers the administrative view', async () => {
    const name = uniqueName('Created');
    const record = await t.ok(
      'AdminUserRpc.create',
      { email: `${name}@Example.com`, username: name, password: 'member password', role: 'staff', firstName: 'Cy', partnerContactId: 'c-1' },
      { token: admin.token },
    );
    assert.deepEqual(Object.keys(record).sort(), USER_RECORD_FIELDS);
    assert.equal(record.email, `${name.toLowerCase()}@example.com`);
    assert.equal(record.role, 'staff');
    assert.equal(record.subscriptionId, admin.subscriptionId);
    assert.equal(record.isActive, true);
    assert.equal(record.isVerified, false);
    assert.equal(record.onboardingCompleted, false);
    assert.equal(record.partnerContactId, 'c-1');
    assert.deepEqual(record.oauthProfiles, []);
    const session = await t.ok('AuthRpc.login', { identifier: name, password: 'member password' });
    assert.equal(session.user.role, 'staff');
    assert.equal(session.user.subscriptionId, admin.subscriptionId);
  });

  it('validates create params, naming each field, and refuses taken e-mails and usernames', async () => {
    const response = await t.call('AdminUserRpc.create', { email: 'nope', username: 'x', password: 'short', role: 'superuser' }, { token: admin.token });
    assert.equal(response.status, 400);
    assert.deepEqual(response.body.data.issues.map((issue: any) => issue.path).sort(), ['email', 'password', 'role', 'username']);
    const taken = await t.call(
      'AdminUserRpc.create',
      { email: otherAdmin.user.email, username: uniqueName(), password: 'member password', role: 'user' },
      { token: admin.token },
    );
    assert.equal(taken.status, 409);
    const takenName = await t.call(
      'AdminUserRpc.create',
      { email: `${uniqueName()}@example.com`, username: otherAdmin.user.username.toUpperCase(), password: 'member password', role: 'user' },
      { token: admin.token },
    );
    assert.equal(takenName.status, 409);
  });

  it('pages, filters and sorts users of the subscription only', async () => {
    const tag = uniqueName('pg').toLowerCase();
    for (let index = 0; index < 5; index++) {
      await createUser({ email: `${tag}-${index}@example.com`, username: `${tag}-${index}`, role: index % 2 ? 'staff' : 'user' });
    }
    const filter = { email: { $regex: `^${tag.toUpperCase()}-`, $options: 'i' } };
    const first = await t.ok('AdminUserRpc.getData', { filter, sort: { email: -1 }, page: 1, pageSize: 2 }, { token: admin.token });
    assert.deepEqual(
      { ...first, docs: first.docs.map((doc: any) => doc.email) },
      { docs: [`${tag}-4@example.com`, `${tag}-3@example.com`], totalDocs: 5, limit: 2, page: 1, totalPages: 3, hasNextPage: true, hasPrevPage: false },
    );
    const last = await t.ok('AdminUserRpc.getData', { filter, sort: { email: -1 }, page: 3, pageSize: 2 }, { token: admin.token });
    assert.deepEqual(
      last.docs.map((doc: any) => doc.email),
      [`${tag}-0@example.com`],
    );
    assert.equal(last.hasNextPage, false);
    assert.equal(last.hasPrevPage, true);

    const staff = await t.ok('AdminUserRpc.getData', { filter: { $and: [filter, { role: { $in: ['staff'] } }] } }, { token: admin.token });
    assert.deepEqual(staff.docs.map((doc: any) => doc.email).sort(), [`${tag}-1@example.com`, `${tag}-3@example.com`]);
    assert.equal(staff.limit, 25);
    const either = await t.ok(
      'AdminUserRpc.getData',
      { filter: { $or: [{ email: `${tag}-0@example.com` }, { username: `${tag}-4` }] } },
      { token: admin.token },
    );
    assert.equal(either.totalDocs, 2);

    const all = await t.ok('AdminUserRpc.getData', { pageSize: 200 }, { token: admin.token });
    assert.ok(all.docs.every((doc: any) => doc.subscriptionId === admin.subscriptionId));
    assert.ok(!all.docs.some((doc: any) => doc._id === otherAdmin.user._id));
    const theirs = await t.ok('AdminUserRpc.getData', { filter: { email: { $regex: tag } } }, { token: otherAdmin.token });
    assert.equal(theirs.totalDocs, 0);
  });

  it('refuses unknown operators and fields, bad values and oversized pages, naming the path', async () => {
    for (const [params, path] of [
      [{ filter: { email: { $where: 'x' } } }, 'filter.email.$where'],
      [{ filter: { passwordHash: 'x' } }, 'filter.passwordHash'],
      [{ filter: { $nor: [] } }, 'filter.$nor'],
      [{ filter: { isActive: 'yes' } }, 'filter.isActive'],
      [{ filter: { _id: 'not-a-uuid' } }, 'filter._id'],
      [{ filter: { createdAt: { $gt: 'yesterday' } } }, 'filter.createdAt.$gt'],
      [{ filter: { email: { $regex: 'a', $options: 'x' } } }, 'filter.email.$options'],
      [{ sort: { passwordHash: 1 } }, 'sort.passwordHash'],
      [{ pageSize: 201 }, 'pageSize'],
      [{ page: 0 }, 'page'],
    ] as const) {
      const response = await t.call('AdminUserRpc.getData', params, { token: admin.token });
      assert.equal(response.status, 400, JSON.stringify(params));
      assert.equal(response.body.data.code, 'VALIDATION_ERROR');
      assert.ok(
        response.body.data.issues.some((issue: any) => issue.path === path),
        `${path}: ${JSON.stringify(response.body.data.issues)}`,
      );
    }
  });

  it('finds, updates and deletes only users of its own subscription', async () => {
    const member = await createUser();
    assert.equal((await t.ok('AdminUserRpc.findById', { id: member._id }, { token: admin.token }))._id, member._id);
    for (const [method, params] of [
      ['AdminUserRpc.findById', { id: member._id }],
      ['AdminUserRpc.update', { _id: member._id, role: 'admin' }],
      ['AdminUserRpc.resetPassword', { userId: member._id, newPassword: 'taken over!' }],
      ['AdminUserRpc.delete', { _id: member._id }],
    ] as const) {
      const response = await t.call(method, params, { token: otherAdmin.token });
      assert.equal(response.status, 404, method);
      assert.equal(response.body.data.error, `User ${member._id} not found`);
    }
    const still = await t.ok('AdminUserRpc.findById', { id: member._id }, { token: admin.token });
    assert.equal(still.role, 'user');
    await t.ok('AuthRpc.login', { identifier: member.username, password: 'member password' });
  });

  it('updates fields, and a deactivated user loses login, sessions and API keys at once', async () => {
    const member = await createUser();
    const session = await t.ok('AuthRpc.login', { identifier: member.username, password: 'member password' });
    const key = await t.ok('ApiKeyRpc.create', { description: 'member key' }, { token: session.token });
    await t.ok('NoteRpc.whoAmI', {}, { apiKey: key.fullKey }); // cached
    const updated = await t.ok('AdminUserRpc.update', { _id: member._id, firstName: 'Dee', isVerified: true, oauthProfiles: [] }, { token: admin.token });
    assert.equal(updated.firstName, 'Dee');
    assert.equal(updated.isVerified, true);
    assert.deepEqual(updated.oauthProfiles, []);

    const promoted = await t.ok('AdminUserRpc.update', { _id: member._id, role: 'staff' }, { token: admin.token });
    assert.equal(promoted.role, 'staff');
    assert.equal((await t.ok('NoteRpc.whoAmI', {}, { apiKey: key.fullKey })).role, 'staff', 'the cached role was dropped');

    await t.ok('AdminUserRpc.update', { _id: member._id, isActive: false }, { token: admin.token });
    assert.equal((await t.call('NoteRpc.whoAmI', {}, { apiKey: key.fullKey })).status, 401);
    assert.equal((await t.call('AuthRpc.getSession', {}, { token: session.token })).status, 401);
    const login = await t.call('AuthRpc.login', { identifier: member.username, password: 'member password' });
    assert.equal(login.status, 401);
    assert.match(login.body.data.error, /deactivated/);

    await t.ok('AdminUserRpc.update', { _id: member._id, isActive: true }, { token: admin.token });
    await t.ok('NoteRpc.whoAmI', {}, { apiKey: key.fullKey });
  });

  it('keeps declared provider profiles as data, and links none: a claimed link, a duplicate or a malformed one is refused and changes nothing', async () => {
    const declared = [{ provider: 'acme', id: '42' }];
    const member = await createUser({ oauthProfiles: declared });
    assert.deepEqual(member.oauthProfiles, [{ provider: 'acme', id: '42', linked: false }]);
    assert.deepEqual((await t.ok('AdminUserRpc.findById', { id: member._id }, { token: admin.token })).oauthProfiles, member.oauthProfiles);
    // A record read goes back as it is.
    const same = await t.ok('AdminUserRpc.update', { _id: member._id, oauthProfiles: member.oauthProfiles }, { token: admin.token });
    assert.deepEqual(same.oauthProfiles, member.oauthProfiles);

    const name = uniqueName('linked');
    const refusals: [string, Record<string, unknown>, string][] = [
      [
        'AdminUserRpc.create',
        {
          email: `${name}@example.com`,
          username: name,
          password: 'member password',
          role: 'user',
          oauthProfiles: [{ provider: 'acme', id: '7', linked: true }],
        },
        'oauthProfiles.0',
      ],
      ['AdminUserRpc.update', { _id: member._id, firstName: 'Eve', oauthProfiles: [{ provider: 'acme', id: '7', linked: true }] }, 'oauthProfiles.0'],
      ['AdminUserRpc.update', { _id: member._id, firstName: 'Eve', oauthProfiles: [...declared, ...declared] }, 'oauthProfiles.1'],
      [
        'AdminUserRpc.update',
        { _id: member._id, firstName: 'Eve', oauthProfiles: [{ provider: 'acme', id: '7', email: 'someone@example.com' }] },
        'oauthProfiles.0.email',
      ],
      ['AdminUserRpc.update', { _id: member._id, firstName: 'Eve', oauthProfiles: [{ provider: 'ac me', id: '7' }] }, 'oauthProfiles.0.provider'],
      ['AdminUserRpc.update', { _id: member._id, firstName: 'Eve', oauthProfiles: [{ provider: 'acme', id: '' }] }, 'oauthProfiles.0.id'],
    ];
    for (const [method, params, path] of refusals) {
      const refused = await t.call(method, params, { token: admin.token });
      assert.equal(refused.status, 400, method);
      assert.deepEqual(
        refused.body.data.issues.map((issue: any) => issue.path),
        [path],
        `${method} ${JSON.stringify(params)}`,
      );
    }
    assert.equal((await t.ok('AdminUserRpc.getData', { filter: { username: name } }, { token: admin.token })).totalDocs, 0);
    const unchanged = await t.ok('AdminUserRpc.findById', { id: member._id }, { token: admin.token });
    assert.deepEqual([unchanged.firstName, unchanged.oauthProfiles], [null, member.oauthProfiles]);

    const cleared = await t.ok('AdminUserRpc.update', { _id: member._id, oauthProfiles: [] }, { token: admin.token });
    assert.deepEqual(cleared.oauthProfiles, []);
  });

  it('resetPassword sets the password and ends every session of the user', async () => {
    const member = await createUser();
    const session = await t.ok('AuthRpc.login', { identifier: member.username, password: 'member password' });
    assert.equal(await t.ok('AdminUserRpc.resetPassword', { userId: member._id, newPassword: 'brand new password' }, { token: admin.token }), true);
    assert.equal((await t.call('AuthRpc.getSession', {}, { token: session.token })).status, 401);
    assert.equal((await t.call('AuthRpc.login', { identifier: member.username, password: 'member password' })).status, 401);
    await t.ok('AuthRpc.login', { identifier: member.username, password: 'brand new password' });
    const short = await t.call('AdminUserRpc.resetPassword', { userId: member._id, newPassword: 'short' }, { token: admin.token });
    assert.deepEqual(short.body.data.issues, [{ path: 'newPassword', message: 'Password must be at least 8 characters' }]);
  });

  it('deletes a user with their credentials, but never the caller nor the last admin', async () => {
    const member = await createUser();
    const session = await t.ok('AuthRpc.login', { identifier: member.username, password: 'member password' });
    const key = await t.ok('ApiKeyRpc.create', { description: 'doomed' }, { token: session.token });
    assert.deepEqual(await t.ok('AdminUserRpc.delete', { _id: member._id }, { token: admin.token }), { acknowledged: true, deletedCount: 1 });
    assert.equal((await t.call('NoteRpc.whoAmI', {}, { apiKey: key.fullKey })).status, 401);
    assert.equal((await t.call('AuthRpc.getSession', {}, { token: session.token })).status, 401);
    assert.equal((await t.call('AdminUserRpc.findById', { id: member._id }, { token: admin.token })).status, 404);

    const self = await t.call('AdminUserRpc.delete', { _id: admin.user._id }, { token: admin.token });
    assert.equal(self.status, 400);
    const demote = await t.call('AdminUserRpc.update', { _id: otherAdmin.user._id, role: 'user' }, { token: otherAdmin.token });
    assert.equal(demote.status, 409);
    assert.match(demote.body.data.error, /last active admin/);
    const deactivate = await t.call('AdminUserRpc.update', { _id: otherAdmin.user._id, isActive: false }, { token: otherAdmin.token });
    assert.equal(deactivate.status, 409);
    assert.equal((await t.ok('AuthRpc.getSession', {}, { token: otherAdmin.token })).user.role, 'admin');
  });

  it('lists the available roles', async () => {
    assert.deepEqual(await t.ok('AdminUserRpc.getAvailableRoles', {}, { token: admin.token }), ['admin', 'staff', 'user', 'agent']);
  });

  it('creates invite codes shown once, lists them without the code, and revokes them', async () => {
    const expiresAt = new Date(Date.now() + 86_400_000).toISOString();
    const invite = await t.ok('AdminUserRpc.createInviteCode', { role: 'staff', maxUses: 3, expiresAt }, { token: admin.token });
    assert.match(invite.code, /^inv_[A-Za-z0-9_-]{20}$/);
    assert.equal(invite.hint, invite.code.slice(0, 8));
    assert.deepEqual(
      { role: invite.role, maxUses: invite.maxUses, uses: invite.uses, status: invite.status, expiresAt: invite.expiresAt, createdBy: invite.createdBy },
      { role: 'staff', maxUses: 3, uses: 0, status: 'active', expiresAt, createdBy: admin.user._id },
    );
    const defaults = await t.ok('AdminUserRpc.createInviteCode', {}, { token: admin.token });
    assert.deepEqual([defaults.role, defaults.maxUses, defaults.expiresAt], ['user', 1, null]);

    const list = await t.ok('AdminUserRpc.listInviteCodes', {}, { token: admin.token });
    assert.equal(list.totalCount, 2);
    assert.ok(!JSON.stringify(list).includes(invite.code));
    assert.ok(list.data.every((record: any) => !('code' in record) && !('codeHash' in record)));
    assert.equal((await t.ok('AdminUserRpc.listInviteCodes', {}, { token: otherAdmin.token })).totalCount, 0);

    assert.equal((await t.call('AdminUserRpc.revokeInviteCode', { _id: invite._id }, { token: otherAdmin.token })).status, 404);
    const revoked = await t.ok('AdminUserRpc.revokeInviteCode', { _id: invite._id }, { token: admin.token });
    assert.equal(revoked.status, 'revoked');
    assert.ok(revoked.revokedAt);

    for (const [params, path] of [
      [{ maxUses: 0 }, 'maxUses'],
      [{ expiresAt: '2001-01-01T00:00:00Z' }, 'expiresAt'],
      [{ expiresAt: 'soon' }, 'expiresAt'],
      [{ role: 'owner' }, 'role'],
    ] as const) {
      const response = await t.call('AdminUserRpc.createInviteCode', params, { token: admin.token });
      assert.equal(response.status, 400, JSON.stringify(params));
      assert.ok(
        response.body.data.issues.some((issue: any) => issue.path === path),
        JSON.stringify(response.body.data.issues),
      );
    }
  });
});
