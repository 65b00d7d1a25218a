import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import type { AdminUserRpcCreateParams } from '../../../test/support/caller.ts';
import { refused } from '../../../test/support/caller.ts';
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

  const createUser = async (fields: Partial<AdminUserRpcCreateParams> = {}) => {
    const name = uniqueName('member');
    return t.as(admin).AdminUserRpc.create({ email: `${name}@example.com`, username: name, password: 'member password', role: 'user', ...fields });
  };

  it('is for admins only', async () => {
    const user = await addUser(t, admin.subscriptionId, 'user');
    const staff = await addUser(t, admin.subscriptionId, 'staff');
    const operations = t.app.registry.all().filter((operation) => operation.group === 'AdminUserRpc');
    assert.ok(operations.length >= 10);
    for (const { method, access } of operations) {
      assert.equal(access, 'admin', method);
      for (const who of [user, staff]) {
        await refused(t.as(who).call(method, {}), 'FORBIDDEN', method);
      }
    }
  });

  it('creates a user who can log in, and answers the administrative view', async () => {
    const name = uniqueName('Created');
    const record = await t.as(admin).AdminUserRpc.create({
      email: `${name}@Example.com`,
      username: name,
      password: 'member password',
      role: 'staff',
      firstName: 'Cy',
      partnerContactId: 'c-1',
    });
    assert.deepEqual(Object.keys(record).sort(), USER_RECORD_FIELDS);
    assert.equal(record.email, `${name.toLowerCase()}@example.com`);
    assert.equal(record.role, 'staff');
    assert.equal(record.subscriptionId, admin.subscriptionId);
    assert.equal(record.isActive, true);
    assert.equal(record.isVerified, false);
    assert.equal(record.onboardingCompleted, false);
    assert.equal(record.partnerContactId, 'c-1');
    assert.deepEqual(record.oauthProfiles, []);
    const session = await t.as(null).AuthRpc.login({ identifier: name, password: 'member password' });
    assert.equal(session.user.role, 'staff');
    assert.equal(session.user.subscriptionId, admin.subscriptionId);
  });

  it('validates create params, naming each field, and refuses taken e-mails and usernames', async () => {
    const invalid = await refused(
      t.as(admin).call('AdminUserRpc.create', { email: 'nope', username: 'x', password: 'short', role: 'superuser' }),
      'VALIDATION_ERROR',
    );
    assert.deepEqual(invalid.issues!.map((issue) => issue.path).sort(), ['email', 'password', 'role', 'username']);
    await refused(
      t.as(admin).AdminUserRpc.create({ email: otherAdmin.user.email, username: uniqueName(), password: 'member password', role: 'user' }),
      'CONFLICT',
    );
    await refused(
      t.as(admin).AdminUserRpc.create({
        email: `${uniqueName()}@example.com`,
        username: otherAdmin.user.username.toUpperCase(),
        password: 'member password',
        role: 'user',
      }),
      'CONFLICT',
    );
  });

  it('pages, filters and sorts users of the subscription only', async () => {
    const tag = uniqueName('pg').toLowerCase();
    for (let index = 0; index < 5; index++) {
      await createUser({ email: `${tag}-${index}@example.com`, username: `${tag}-${index}`, role: index % 2 ? 'staff' : 'user' });
    }
    const filter = { email: { $regex: `^${tag.toUpperCase()}-`, $options: 'i' } };
    const first = await t.as(admin).AdminUserRpc.getData({ filter, sort: { email: -1 }, page: 1, pageSize: 2 });
    assert.deepEqual(
      { ...first, docs: first.docs.map((doc) => doc.email) },
      { docs: [`${tag}-4@example.com`, `${tag}-3@example.com`], totalDocs: 5, limit: 2, page: 1, totalPages: 3, hasNextPage: true, hasPrevPage: false },
    );
    const last = await t.as(admin).AdminUserRpc.getData({ filter, sort: { email: -1 }, page: 3, pageSize: 2 });
    assert.deepEqual(
      last.docs.map((doc) => doc.email),
      [`${tag}-0@example.com`],
    );
    assert.equal(last.hasNextPage, false);
    assert.equal(last.hasPrevPage, true);

    const staff = await t.as(admin).AdminUserRpc.getData({ filter: { $and: [filter, { role: { $in: ['staff'] } }] } });
    assert.deepEqual(staff.docs.map((doc) => doc.email).sort(), [`${tag}-1@example.com`, `${tag}-3@example.com`]);
    assert.equal(staff.limit, 25);
    const either = await t.as(admin).AdminUserRpc.getData({ filter: { $or: [{ email: `${tag}-0@example.com` }, { username: `${tag}-4` }] } });
    assert.equal(either.totalDocs, 2);

    const all = await t.as(admin).AdminUserRpc.getData({ pageSize: 200 });
    assert.ok(all.docs.every((doc) => doc.subscriptionId === admin.subscriptionId));
    assert.ok(!all.docs.some((doc) => doc._id === otherAdmin.user._id));
    const theirs = await t.as(otherAdmin).AdminUserRpc.getData({ filter: { email: { $regex: tag } } });
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
      const error = await refused(t.as(admin).call('AdminUserRpc.getData', params), 'VALIDATION_ERROR', JSON.stringify(params));
      assert.ok(
        error.issues!.some((issue) => issue.path === path),
        `${path}: ${JSON.stringify(error.issues)}`,
      );
    }
  });

  it('finds, updates and deletes only users of its own subscription', async () => {
    const member = await createUser();
    assert.equal((await t.as(admin).AdminUserRpc.findById({ id: member._id }))._id, member._id);
    const theirs = t.as(otherAdmin).AdminUserRpc;
    for (const [method, call] of [
      ['findById', () => theirs.findById({ id: member._id })],
      ['update', () => theirs.update({ _id: member._id, role: 'admin' })],
      ['resetPassword', () => theirs.resetPassword({ userId: member._id, newPassword: 'taken over!' })],
      ['delete', () => theirs.delete({ _id: member._id })],
    ] as const) {
      const error = await refused(call(), 'NOT_FOUND', method);
      assert.equal(error.message, `User ${member._id} not found`);
    }
    const still = await t.as(admin).AdminUserRpc.findById({ id: member._id });
    assert.equal(still.role, 'user');
    await t.as(null).AuthRpc.login({ identifier: member.username, password: 'member password' });
  });

  it('updates fields, and a deactivated user loses login, sessions and API keys at once', async () => {
    const member = await createUser();
    const session = await t.as(null).AuthRpc.login({ identifier: member.username, password: 'member password' });
    const key = await t.as(session).ApiKeyRpc.create({ description: 'member key' });
    await t.as({ apiKey: key.fullKey }).call('NoteRpc.whoAmI'); // cached
    const updated = await t.as(admin).AdminUserRpc.update({ _id: member._id, firstName: 'Dee', isVerified: true, oauthProfiles: [] });
    assert.equal(updated.firstName, 'Dee');
    assert.equal(updated.isVerified, true);
    assert.deepEqual(updated.oauthProfiles, []);

    const promoted = await t.as(admin).AdminUserRpc.update({ _id: member._id, role: 'staff' });
    assert.equal(promoted.role, 'staff');
    assert.equal((await t.as({ apiKey: key.fullKey }).call<{ role: string }>('NoteRpc.whoAmI')).role, 'staff', 'the cached role was dropped');

    await t.as(admin).AdminUserRpc.update({ _id: member._id, isActive: false });
    await refused(t.as({ apiKey: key.fullKey }).call('NoteRpc.whoAmI'), 'UNAUTHENTICATED');
    await refused(t.as(session).AuthRpc.getSession(), 'UNAUTHENTICATED');
    const login = await refused(t.as(null).AuthRpc.login({ identifier: member.username, password: 'member password' }), 'UNAUTHENTICATED');
    assert.match(login.message, /deactivated/);

    await t.as(admin).AdminUserRpc.update({ _id: member._id, isActive: true });
    await t.as({ apiKey: key.fullKey }).call('NoteRpc.whoAmI');
  });

  it('keeps declared provider profiles as data, and links none: a claimed link, a duplicate or a malformed one is refused and changes nothing', async () => {
    const declared = [{ provider: 'acme', id: '42' }];
    const member = await createUser({ oauthProfiles: declared });
    assert.deepEqual(member.oauthProfiles, [{ provider: 'acme', id: '42', linked: false }]);
    assert.deepEqual((await t.as(admin).AdminUserRpc.findById({ id: member._id })).oauthProfiles, member.oauthProfiles);
    // A record read goes back as it is.
    const same = await t.as(admin).AdminUserRpc.update({ _id: member._id, oauthProfiles: member.oauthProfiles });
    assert.deepEqual(same.oauthProfiles, member.oauthProfiles);

    const name = uniqueName('linked');
    // Params the types would refuse, called by name.
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
      const error = await refused(t.as(admin).call(method, params), 'VALIDATION_ERROR', method);
      assert.deepEqual(
        error.issues!.map((issue) => issue.path),
        [path],
        `${method} ${JSON.stringify(params)}`,
      );
    }
    assert.equal((await t.as(admin).AdminUserRpc.getData({ filter: { username: name } })).totalDocs, 0);
    const unchanged = await t.as(admin).AdminUserRpc.findById({ id: member._id });
    assert.deepEqual([unchanged.firstName, unchanged.oauthProfiles], [null, member.oauthProfiles]);

    const cleared = await t.as(admin).AdminUserRpc.update({ _id: member._id, oauthProfiles: [] });
    assert.deepEqual(cleared.oauthProfiles, []);
  });

  it('resetPassword sets the password and ends every session of the user', async () => {
    const member = await createUser();
    const session = await t.as(null).AuthRpc.login({ identifier: member.username, password: 'member password' });
    assert.equal(await t.as(admin).AdminUserRpc.resetPassword({ userId: member._id, newPassword: 'brand new password' }), true);
    await refused(t.as(session).AuthRpc.getSession(), 'UNAUTHENTICATED');
    await refused(t.as(null).AuthRpc.login({ identifier: member.username, password: 'member password' }), 'UNAUTHENTICATED');
    await t.as(null).AuthRpc.login({ identifier: member.username, password: 'brand new password' });
    const short = await refused(t.as(admin).AdminUserRpc.resetPassword({ userId: member._id, newPassword: 'short' }), 'VALIDATION_ERROR');
    assert.deepEqual(short.issues, [{ path: 'newPassword', message: 'Password must be at least 8 characters' }]);
  });

  it('deletes a user with their credentials, but never the caller nor the last admin', async () => {
    const member = await createUser();
    const session = await t.as(null).AuthRpc.login({ identifier: member.username, password: 'member password' });
    const key = await t.as(session).ApiKeyRpc.create({ description: 'doomed' });
    assert.deepEqual(await t.as(admin).AdminUserRpc.delete({ _id: member._id }), { acknowledged: true, deletedCount: 1 });
    await refused(t.as({ apiKey: key.fullKey }).call('NoteRpc.whoAmI'), 'UNAUTHENTICATED');
    await refused(t.as(session).AuthRpc.getSession(), 'UNAUTHENTICATED');
    await refused(t.as(admin).AdminUserRpc.findById({ id: member._id }), 'NOT_FOUND');

    await refused(t.as(admin).AdminUserRpc.delete({ _id: admin.user._id }), 'BAD_REQUEST');
    const demote = await refused(t.as(otherAdmin).AdminUserRpc.update({ _id: otherAdmin.user._id, role: 'user' }), 'CONFLICT');
    assert.match(demote.message, /last active admin/);
    await refused(t.as(otherAdmin).AdminUserRpc.update({ _id: otherAdmin.user._id, isActive: false }), 'CONFLICT');
    assert.equal((await t.as(otherAdmin).AuthRpc.getSession()).user.role, 'admin');
  });

  it('lists the available roles', async () => {
    assert.deepEqual(await t.as(admin).AdminUserRpc.getAvailableRoles(), ['admin', 'staff', 'user', 'agent']);
  });

  it('creates invite codes shown once, lists them without the code, and revokes them', async () => {
    const expiresAt = new Date(Date.now() + 86_400_000).toISOString();
    const invite = await t.as(admin).AdminUserRpc.createInviteCode({ role: 'staff', maxUses: 3, expiresAt });
    assert.match(invite.code, /^inv_[A-Za-z0-9_-]{20}$/);
    assert.equal(invite.hint, invite.code.slice(0, 8));
    assert.deepEqual(
      { role: invite.role, maxUses: invite.maxUses, uses: invite.uses, status: invite.status, expiresAt: invite.expiresAt, createdBy: invite.createdBy },
      { role: 'staff', maxUses: 3, uses: 0, status: 'active', expiresAt, createdBy: admin.user._id },
    );
    const defaults = await t.as(admin).AdminUserRpc.createInviteCode();
    assert.deepEqual([defaults.role, defaults.maxUses, defaults.expiresAt], ['user', 1, null]);

    const list = await t.as(admin).AdminUserRpc.listInviteCodes();
    assert.equal(list.totalCount, 2);
    assert.ok(!JSON.stringify(list).includes(invite.code));
    assert.ok(list.data.every((record) => !('code' in record) && !('codeHash' in record)));
    assert.equal((await t.as(otherAdmin).AdminUserRpc.listInviteCodes()).totalCount, 0);

    await refused(t.as(otherAdmin).AdminUserRpc.revokeInviteCode({ _id: invite._id }), 'NOT_FOUND');
    const revoked = await t.as(admin).AdminUserRpc.revokeInviteCode({ _id: invite._id });
    assert.equal(revoked.status, 'revoked');
    assert.ok(revoked.revokedAt);

    for (const [params, path] of [
      [{ maxUses: 0 }, 'maxUses'],
      [{ expiresAt: '2001-01-01T00:00:00Z' }, 'expiresAt'],
      [{ expiresAt: 'soon' }, 'expiresAt'],
      [{ role: 'owner' }, 'role'],
    ] as const) {
      const error = await refused(t.as(admin).call('AdminUserRpc.createInviteCode', params), 'VALIDATION_ERROR', JSON.stringify(params));
      assert.ok(
        error.issues!.some((issue) => issue.path === path),
        JSON.stringify(error.issues),
      );
    }
  });
});
