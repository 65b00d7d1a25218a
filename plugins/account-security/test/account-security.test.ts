import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { after, before, describe, it } from 'node:test';
import { SoftAuthenticator, totpCode as codeOf } from '../../../test/support/authenticator.ts';
import { refused } from '../../../test/support/caller.ts';
import { startTestApp, uniqueName, type Session, type TestApp } from '../../../test/support/harness.ts';
import { addUser } from '../../../test/support/users.ts';

/** Second factors, step-ups, the policy and devices over the API (passkeys in a browser: test/e2e/security.test.ts). */
describe('AccountSecurityRpc', () => {
  let t: TestApp;

  before(async () => {
    t = await startTestApp({ plugins: ['auth', 'admin-user', 'api-key', 'secrets', 'user-profile', 'account-security'], withNotes: false });
  });
  after(() => t?.close());

  /** A session that proved itself an hour ago, as the step-up check sees it. */
  const age = async (session: { token: string }) => {
    const [aged] = await t.app.deps.db.execute<{ id: string }>(
      `update auth_session set signed_in_at = now() - interval '1 hour' where token_hash = ? returning id`,
      [createHash('sha256').update(session.token).digest('hex')],
    );
    await t.app.deps.credentials.changed({ sessionId: aged!.id });
  };

  /** Enrols an authenticator app for the session's user: its secret, and the recovery codes answered. */
  const enrolTotp = async (session: { token: string }) => {
    const enrolment = await t.as(session).AccountSecurityRpc.beginTotpEnrolment({});
    assert.match(enrolment.uri, /^otpauth:\/\/totp\/.+\?.*secret=/);
    const confirmed = await t.as(session).AccountSecurityRpc.confirmTotpEnrolment({ enrolmentId: enrolment.enrolmentId, code: codeOf(enrolment.secret) });
    return { secret: enrolment.secret, recoveryCodes: confirmed.recoveryCodes! };
  };

  /** A password login a second factor stops: its ticket and what it asks for. */
  const stopped = async (identifier: string, password: string, code = 'SECOND_FACTOR_REQUIRED') => {
    const answer = await t.call('AuthRpc.login', { identifier, password });
    assert.equal(answer.status, 401, JSON.stringify(answer.body));
    assert.equal(answer.body.data.code, code);
    assert.equal(answer.headers.get('set-cookie'), null, 'no session cookie before the second factor');
    return answer.body.data.details as { ticket: string; expiresAt: string; methods: string[] };
  };

  it('an authenticator app: enrolled with a first code, then asked at sign-in; a code works once, a recovery code once', async () => {
    const owner = await t.signup();
    const { secret, recoveryCodes } = await enrolTotp(owner);
    assert.equal(recoveryCodes.length, 10);
    assert.equal(new Set(recoveryCodes).size, 10);
    assert.ok(recoveryCodes.every((code) => /^[a-z2-9]{5}-[a-z2-9]{5}$/.test(code)));

    const first = await stopped(owner.user.username, owner.password);
    assert.deepEqual(first.methods, ['authenticator', 'recovery-code']);
    assert.match(first.ticket, /^sit_/);
    await refused(t.as(null).AccountSecurityRpc.verifySecondFactor({ ticket: first.ticket, code: '000000' }), 'VALIDATION_ERROR');
    const next = codeOf(secret, 1);
    const signedIn = await t.call('AccountSecurityRpc.verifySecondFactor', { ticket: first.ticket, code: next });
    assert.equal(signedIn.status, 200, JSON.stringify(signedIn.body));
    assert.equal(signedIn.body.data.status, 'signed-in');
    assert.match(signedIn.headers.get('set-cookie') ?? '', /^session=/);
    const session = { token: signedIn.body.data.token as string };
    assert.deepEqual((await t.as(session).AccountSecurityRpc.getSecurity({})).session?.amr, ['pwd', 'otp']);
    // The ticket made its one session.
    await refused(t.as(null).AccountSecurityRpc.verifySecondFactor({ ticket: first.ticket, code: next }), 'UNAUTHENTICATED');

    const replay = await stopped(owner.user.username, owner.password);
    const replayed = await refused(t.as(null).AccountSecurityRpc.verifySecondFactor({ ticket: replay.ticket, code: next }), 'VALIDATION_ERROR');
    assert.match(replayed.message, /used once/);
    const byRecovery = await t.as(null).AccountSecurityRpc.verifySecondFactor({ ticket: replay.ticket, code: recoveryCodes[0]!.toUpperCase() });
    assert.equal(byRecovery.status, 'signed-in');
    const again = await stopped(owner.user.username, owner.password);
    await refused(t.as(null).AccountSecurityRpc.verifySecondFactor({ ticket: again.ticket, code: recoveryCodes[0]! }), 'VALIDATION_ERROR');
    const overview = await t.as(session).AccountSecurityRpc.getSecurity({});
    assert.equal(overview.authenticator, true);
    assert.equal(overview.recoveryCodesLeft, 9);
    const stored = await t.app.deps.db.execute<{ secret: string }>('select secret from account_security_authenticator where user_id = ?', [owner.user._id]);
    assert.ok(!stored[0]!.secret.includes(secret), 'the secret is kept encrypted');
  });

  it('wrong codes are counted like logins: past the limit every code is refused with RATE_LIMITED and Retry-After', async () => {
    const owner = await t.signup();
    const { secret } = await enrolTotp(owner);
    const { ticket } = await stopped(owner.user.username, owner.password);
    for (let attempt = 0; attempt < 5; attempt++) {
      await refused(t.as(null).AccountSecurityRpc.verifySecondFactor({ ticket, code: String(111111 + attempt) }), 'VALIDATION_ERROR');
    }
    const locked = await t.call('AccountSecurityRpc.verifySecondFactor', { ticket, code: codeOf(secret, 1) });
    assert.equal(locked.status, 429);
    assert.equal(locked.body.data.code, 'RATE_LIMITED');
    assert.ok(Number(locked.headers.get('retry-after')) > 0);
  });

  it('operations that need a recent sign-in refuse an old session until it steps up', async () => {
    const admin = await t.signup();
    await t.as(admin).SecretsRpc.create({ zone: 'ops', key: 'token', value: 's3cret' });
    assert.equal((await t.as(admin).SecretsRpc.getSecretValue({ zone: 'ops', key: 'token' })).value, 's3cret');
    const member = await addUser(t, admin.subscriptionId, 'user');
    await age(admin);
    const stale = await refused(t.as(admin).SecretsRpc.getSecretValue({ zone: 'ops', key: 'token' }), 'STEP_UP_REQUIRED');
    assert.match(stale.message, /AccountSecurityRpc\.stepUp/);
    await refused(t.as(admin).ApiKeyRpc.create({ description: 'ci' }), 'STEP_UP_REQUIRED');
    await refused(t.as(admin).AdminUserRpc.update({ _id: member.user._id, role: 'staff' }), 'STEP_UP_REQUIRED');
    await refused(t.as(admin).AccountSecurityRpc.beginTotpEnrolment({}), 'STEP_UP_REQUIRED');
    // What changes no role needs none.
    assert.equal((await t.as(admin).AdminUserRpc.update({ _id: member.user._id, firstName: 'Ann' })).firstName, 'Ann');

    const wrong = await refused(t.as(admin).AccountSecurityRpc.stepUp({ password: 'not it at all' }), 'VALIDATION_ERROR');
    assert.deepEqual(wrong.issues, [{ path: 'password', message: 'The password is incorrect' }]);
    const confirmed = await t.as(admin).AccountSecurityRpc.stepUp({ password: admin.password });
    assert.ok(Date.now() - Date.parse(confirmed.signedInAt) < 60_000);
    assert.equal((await t.as(admin).SecretsRpc.getSecretValue({ zone: 'ops', key: 'token' })).value, 's3cret');
    assert.equal((await t.as(admin).AdminUserRpc.update({ _id: member.user._id, role: 'staff' })).role, 'staff');

    // With a second factor, the password alone no longer confirms.
    const { recoveryCodes } = await enrolTotp(admin);
    await age(admin);
    await refused(t.as(admin).AccountSecurityRpc.stepUp({ password: admin.password }), 'BAD_REQUEST');
    const byCode = await t.as(admin).AccountSecurityRpc.stepUp({ code: recoveryCodes[1]! });
    assert.deepEqual(byCode.amr, ['pwd', 'recovery']);
    const key = await t.as(admin).ApiKeyRpc.create({ description: 'ci' });
    // A key was made under a step-up: it needs none.
    assert.equal((await t.as({ apiKey: key.fullKey }).SecretsRpc.getSecretValue({ zone: 'ops', key: 'token' })).value, 's3cret');
  });

  it("an admin requires a factor of staff: past the grace period a staff member's sign-in enrols one before any session", async () => {
    const admin = await t.signup();
    const staff = await addUser(t, admin.subscriptionId, 'staff');
    const member = await addUser(t, admin.subscriptionId, 'user');
    await refused(t.as(staff).AccountSecurityRpc.setPolicy({ requiredFor: 'staff' }), 'FORBIDDEN');
    await refused(t.as(member).AccountSecurityRpc.getPolicy({}), 'FORBIDDEN');
    const policy = await t.as(admin).AccountSecurityRpc.setPolicy({ requiredFor: 'staff', graceDays: 7 });
    assert.equal(policy.requiredFor, 'staff');
    assert.equal(policy.graceDays, 7);
    // Another subscription's admin sees their own policy, never this one.
    const stranger = await t.signup();
    assert.equal((await t.as(stranger).AccountSecurityRpc.getPolicy({})).requiredFor, 'nobody');

    // Within the grace period: a session, and the overview says from when a factor is needed.
    const graced = await t.as(null).AuthRpc.login({ identifier: staff.username, password: staff.password });
    const overview = await t.as(graced).AccountSecurityRpc.getSecurity({});
    assert.equal(overview.required, true);
    assert.ok(Math.abs(Date.parse(overview.requiredFrom!) - (Date.now() + 7 * 86_400_000)) < 120_000);
    assert.equal((await t.as(member).AccountSecurityRpc.getSecurity({})).required, false);

    await t.as(admin).AccountSecurityRpc.setPolicy({ requiredFor: 'staff', graceDays: 0 });
    const { ticket, methods } = await stopped(staff.username, staff.password, 'ENROLMENT_REQUIRED');
    assert.deepEqual(methods, ['authenticator', 'passkey']);
    // The ticket is no session, and cannot be used as one.
    await refused(t.as({ token: ticket }).AccountSecurityRpc.listSessions({}), 'UNAUTHENTICATED');
    assert.equal((await t.as(null).AccountSecurityRpc.getSignIn({ ticket })).purpose, 'enrol');
    await refused(t.as(null).AccountSecurityRpc.verifySecondFactor({ ticket, code: '123456' }), 'UNAUTHENTICATED');
    const enrolment = await t.as(null).AccountSecurityRpc.beginTotpEnrolment({ ticket });
    const done = await t.as(null).AccountSecurityRpc.confirmTotpEnrolment({ ticket, enrolmentId: enrolment.enrolmentId, code: codeOf(enrolment.secret) });
    assert.equal(done.recoveryCodes?.length, 10);
    assert.equal(done.signIn?.status, 'signed-in');
    const enrolled = { token: (done.signIn as { token: string }).token };
    assert.deepEqual((await t.as(enrolled).AccountSecurityRpc.getSecurity({})).session?.amr, ['pwd', 'otp']);
    // The policy keeps the factor it requires.
    await refused(t.as(enrolled).AccountSecurityRpc.removeTotp({}), 'CONFLICT');
    // Members are not covered; admins are not either, by a policy for staff... but "staff" covers admins too.
    assert.equal((await t.as(null).AuthRpc.login({ identifier: member.username, password: member.password })).user._id, member.user._id);
    await stopped(admin.user.username, admin.password, 'ENROLMENT_REQUIRED');
  });

  it('devices: a person lists their sessions and signs out one or all others; an admin does so for their users only', async () => {
    const admin = await t.signup();
    const member = await addUser(t, admin.subscriptionId, 'user');
    const stranger = await t.signup();
    const phone = await t.call(
      'AuthRpc.login',
      { identifier: member.username, password: member.password },
      { headers: { 'user-agent': 'Mozilla/5.0 (iPhone; CPU iPhone OS 18_0 like Mac OS X) Safari/604.1' } },
    );
    const phoneToken = phone.body.data.token as string;
    const listed = await t.as(member).AccountSecurityRpc.listSessions({});
    assert.equal(listed.items.length, 2);
    const current = listed.items.find((session) => session.current)!;
    const other = listed.items.find((session) => !session.current)!;
    assert.deepEqual(current.amr, ['pwd']);
    assert.match(other.userAgent!, /iPhone/);
    assert.equal(other.ipAddress, '127.0.0.1');

    // Another person's session is not theirs to end, nor another subscription's admin's to see.
    const strangers = await t.as(stranger).AccountSecurityRpc.listSessions({});
    await refused(t.as(member).AccountSecurityRpc.revokeSession({ id: strangers.items[0]!.id }), 'NOT_FOUND');
    await refused(t.as(member).AccountSecurityRpc.revokeUserSessions({ userId: admin.user._id }), 'FORBIDDEN');
    await refused(t.as(stranger).AccountSecurityRpc.listUserSessions({ userId: member.user._id }), 'NOT_FOUND');
    await refused(t.as(stranger).AccountSecurityRpc.revokeUserSessions({ userId: member.user._id }), 'NOT_FOUND');
    assert.equal((await t.as(admin).AccountSecurityRpc.listUserSessions({ userId: member.user._id })).items.length, 2);

    await t.as(member).AccountSecurityRpc.revokeSession({ id: other.id });
    await refused(t.as({ token: phoneToken }).AuthRpc.getSession({}), 'UNAUTHENTICATED');
    const laptop = await t.as(null).AuthRpc.login({ identifier: member.username, password: member.password });
    assert.deepEqual(await t.as(member).AccountSecurityRpc.revokeOtherSessions({}), { revoked: 1 });
    await refused(t.as(laptop).AuthRpc.getSession({}), 'UNAUTHENTICATED');
    assert.deepEqual(await t.as(admin).AccountSecurityRpc.revokeUserSessions({ userId: member.user._id }), { revoked: 1 });
    await refused(t.as(member).AuthRpc.getSession({}), 'UNAUTHENTICATED');
  });

  it('a changed password or a removed factor ends the other sessions', async () => {
    const owner: Session = await t.signup();
    const elsewhere = await t.as(null).AuthRpc.login({ identifier: owner.user.username, password: owner.password });
    await t.as(owner).UserProfileRpc.changePassword({ currentPassword: owner.password, newPassword: 'a new long password' });
    await refused(t.as(elsewhere).AuthRpc.getSession({}), 'UNAUTHENTICATED');
    assert.equal((await t.as(owner).AuthRpc.getSession({})).user._id, owner.user._id);

    const { secret } = await enrolTotp(owner);
    const { ticket } = await stopped(owner.user.username, 'a new long password');
    const second = await t.as(null).AccountSecurityRpc.verifySecondFactor({ ticket, code: codeOf(secret, 1) });
    await t.as(owner).AccountSecurityRpc.removeTotp({});
    await refused(t.as({ token: (second as { token: string }).token }).AuthRpc.getSession({}), 'UNAUTHENTICATED');
    const overview = await t.as(owner).AccountSecurityRpc.getSecurity({});
    assert.deepEqual([overview.authenticator, overview.recoveryCodesLeft], [false, 0]);
    assert.equal((await t.as(null).AuthRpc.login({ identifier: owner.user.username, password: 'a new long password' })).user._id, owner.user._id);
  });

  it('passkeys: registered, a sign-in without a username, a second factor, a step-up; another person’s is refused', async () => {
    const owner = await t.signup();
    const device = new SoftAuthenticator(t.url);
    const begun = await t.as(owner).AccountSecurityRpc.beginPasskeyRegistration({});
    assert.equal((begun.options.authenticatorSelection as { residentKey: string }).residentKey, 'required');
    assert.equal(begun.options.attestation, 'none');
    const first = await t
      .as(owner)
      .AccountSecurityRpc.finishPasskeyRegistration({ challengeId: begun.challengeId, response: device.create(begun.options), name: 'Laptop' });
    assert.equal(first.passkey.name, 'Laptop');
    assert.equal(first.recoveryCodes?.length, 10, 'the first factor answers the recovery codes');
    // A challenge is answered once.
    await refused(
      t
        .as(owner)
        .AccountSecurityRpc.finishPasskeyRegistration({ challengeId: begun.challengeId, response: new SoftAuthenticator(t.url).create(begun.options) }),
      'NOT_FOUND',
    );
    const again = await t.as(owner).AccountSecurityRpc.beginPasskeyRegistration({});
    assert.deepEqual(
      (again.options.excludeCredentials as { id: string }[]).map(({ id }) => id),
      device.credentialIds,
    );
    const second = await t.as(owner).AccountSecurityRpc.finishPasskeyRegistration({ challengeId: again.challengeId, response: device.create(again.options) });
    assert.equal(second.recoveryCodes, null, 'later factors keep the codes');
    assert.deepEqual(
      (await t.as(owner).AccountSecurityRpc.listPasskeys({})).items.map(({ name }) => name),
      ['Laptop', 'Passkey'],
    );

    // No username: the passkey names its user.
    const anyone = await t.as(null).AccountSecurityRpc.beginPasskeySignIn({});
    assert.equal(anyone.options.allowCredentials, undefined);
    const alone = await t
      .as(null)
      .AccountSecurityRpc.finishPasskeySignIn({ challengeId: anyone.challengeId, response: device.get(anyone.options, device.credentialIds[1]) });
    assert.equal(alone.status, 'signed-in');
    const byPasskey = { token: (alone as { token: string }).token };
    assert.equal((await t.as(byPasskey).AuthRpc.getSession({})).user._id, owner.user._id);
    assert.deepEqual((await t.as(byPasskey).AccountSecurityRpc.getSecurity({})).session?.amr, ['webauthn']);

    // A second factor: only the person's own passkeys are offered and taken.
    const { ticket, methods } = await stopped(owner.user.username, owner.password);
    assert.deepEqual(methods, ['passkey', 'recovery-code']);
    const challenge = await t.as(null).AccountSecurityRpc.beginPasskeySignIn({ ticket });
    assert.deepEqual((challenge.options.allowCredentials as { id: string }[]).map(({ id }) => id).sort(), [...device.credentialIds].sort());
    const intruder = await t.signup();
    const theirs = new SoftAuthenticator(t.url);
    const theirBegin = await t.as(intruder).AccountSecurityRpc.beginPasskeyRegistration({});
    await t.as(intruder).AccountSecurityRpc.finishPasskeyRegistration({ challengeId: theirBegin.challengeId, response: theirs.create(theirBegin.options) });
    await refused(
      t.as(null).AccountSecurityRpc.finishPasskeySignIn({
        challengeId: challenge.challengeId,
        response: theirs.get({ ...challenge.options, allowCredentials: undefined }),
      }),
      'UNAUTHENTICATED',
    );
    const retry = await t.as(null).AccountSecurityRpc.beginPasskeySignIn({ ticket });
    const finished = await t.as(null).AccountSecurityRpc.finishPasskeySignIn({ challengeId: retry.challengeId, response: device.get(retry.options) });
    const twoFactor = { token: (finished as { token: string }).token };
    assert.deepEqual((await t.as(twoFactor).AccountSecurityRpc.getSecurity({})).session?.amr, ['pwd', 'webauthn']);

    // Another person's passkey is not theirs to rename or remove.
    const [mine] = (await t.as(owner).AccountSecurityRpc.listPasskeys({})).items;
    await refused(t.as(intruder).AccountSecurityRpc.renamePasskey({ id: mine!.id, name: 'mine now' }), 'NOT_FOUND');
    await refused(t.as(intruder).AccountSecurityRpc.removePasskey({ id: mine!.id }), 'NOT_FOUND');

    // A step-up with a passkey, then removing one ends the other sessions.
    await age(owner);
    await refused(t.as(owner).AccountSecurityRpc.removePasskey({ id: mine!.id }), 'STEP_UP_REQUIRED');
    const stepUp = await t.as(owner).AccountSecurityRpc.beginPasskeySignIn({});
    const confirmed = await t.as(owner).AccountSecurityRpc.stepUp({ challengeId: stepUp.challengeId, response: device.get(stepUp.options) });
    assert.ok(confirmed.amr.includes('webauthn'));
    await t.as(owner).AccountSecurityRpc.removePasskey({ id: mine!.id });
    await refused(t.as(twoFactor).AuthRpc.getSession({}), 'UNAUTHENTICATED');
    await refused(t.as(byPasskey).AuthRpc.getSession({}), 'UNAUTHENTICATED');
    assert.equal((await t.as(owner).AccountSecurityRpc.listPasskeys({})).items.length, 1);
    // The removed passkey signs nobody in.
    const after = await t.as(null).AccountSecurityRpc.beginPasskeySignIn({});
    await refused(
      t.as(null).AccountSecurityRpc.finishPasskeySignIn({
        challengeId: after.challengeId,
        response: device.get(after.options, mine!.id === first.passkey.id ? device.credentialIds[0] : device.credentialIds[1]),
      }),
      'UNAUTHENTICATED',
    );
  });

  it('sweeps the sign-in tickets that expired, and only those', async () => {
    const owner = await t.signup();
    const { secret } = await enrolTotp(owner);
    const expired = await stopped(owner.user.username, owner.password);
    const waiting = await stopped(owner.user.username, owner.password);
    await t.app.deps.db.execute(`update account_security_ticket set expires_at = now() - interval '1 minute' where token_hash = ?`, [
      createHash('sha256').update(expired.ticket).digest('hex'),
    ]);
    assert.ok((await t.app.depsOf('account-security').accountSecurityService.sweep()) >= 1);
    await refused(t.as(null).AccountSecurityRpc.getSignIn({ ticket: expired.ticket }), 'UNAUTHENTICATED');
    assert.equal((await t.as(null).AccountSecurityRpc.verifySecondFactor({ ticket: waiting.ticket, code: codeOf(secret, 1) })).status, 'signed-in');
  });

  /** A code login to an address the account's owner never proved: the browser's question, answered "join" (plugins/auth/README.md). */
  const joinWithMailbox = async (address: string) => {
    const { otpRequestId } = await t.as(null).AuthRpc.requestVerificationCode({ channelType: 'email', identifier: address });
    const [sent] = await t.app.deps.db.execute<{ body: string }>('select body from auth_outbox where recipient = ? order by created_at desc limit 1', [
      address,
    ]);
    const asked = await t.call('AuthRpc.login', { otpRequestId, code: /\b(\d{6})\b/.exec(sent!.body)![1] });
    assert.equal(asked.body.data.code, 'CONFIRM_JOIN');
    const cookie = asked.headers
      .getSetCookie()
      .map((line) => line.split(';')[0]!)
      .join('; ');
    return fetch(`${t.url}/auth/join?decision=join`, { method: 'POST', redirect: 'manual', headers: { cookie } });
  };

  it('a mailbox alone takes over no account with a factor, and a stale admin session cannot point another account at one', async () => {
    const owner = await t.signup();
    await enrolTotp(owner);
    const refusedJoin = await joinWithMailbox(owner.user.email);
    assert.equal(refusedJoin.status, 409);
    assert.match(await refusedJoin.text(), /second factor/);
    assert.equal((await t.as(owner).AccountSecurityRpc.getSecurity({})).authenticator, true, 'the factor stays');

    const admin = await t.signup();
    const victim = await addUser(t, admin.subscriptionId, 'admin');
    await age(admin);
    await refused(t.as(admin).AdminUserRpc.update({ _id: victim.user._id, email: `${uniqueName('mallory')}@example.com` }), 'STEP_UP_REQUIRED');
  });

  it('codes sent together are counted before any is judged, and a ticket is finished by one request without spending another’s code', async () => {
    const owner = await t.signup();
    const { recoveryCodes } = await enrolTotp(owner);
    await age(owner);
    const burst = await Promise.allSettled(Array.from({ length: 20 }, (_, i) => t.as(owner).AccountSecurityRpc.stepUp({ code: String(300000 + i) })));
    const codes = burst.map((settled) => (settled.status === 'rejected' ? (settled.reason as { code: string }).code : 'OK'));
    assert.equal(codes.filter((code) => code === 'VALIDATION_ERROR').length, 5, codes.join(' '));
    assert.equal(codes.filter((code) => code === 'RATE_LIMITED').length, 15);

    const other = await t.signup();
    const { recoveryCodes: theirs } = await enrolTotp(other);
    const { ticket } = await stopped(other.user.username, other.password);
    const both = await Promise.allSettled(theirs.slice(0, 2).map((code) => t.as(null).AccountSecurityRpc.verifySecondFactor({ ticket, code })));
    assert.deepEqual(both.map((settled) => settled.status).sort(), ['fulfilled', 'rejected']);
    assert.equal((await t.as(other).AccountSecurityRpc.getSecurity({})).recoveryCodesLeft, 9, 'the refused request spent no code');
    assert.equal(recoveryCodes.length, 10);
  });

  it('two removals at once leave the factor the policy requires; a ticket ends with a new password; a passkey signs in alone only with user verification', async () => {
    const owner = await t.signup();
    const staff = await addUser(t, owner.subscriptionId, 'staff');
    await t.as(owner).AccountSecurityRpc.setPolicy({ requiredFor: 'everyone', graceDays: 0 });
    await enrolTotp(owner);
    const device = new SoftAuthenticator(t.url);
    const begun = await t.as(owner).AccountSecurityRpc.beginPasskeyRegistration({});
    const { passkey } = await t
      .as(owner)
      .AccountSecurityRpc.finishPasskeyRegistration({ challengeId: begun.challengeId, response: device.create(begun.options) });
    const removals = await Promise.allSettled([
      t.as(owner).AccountSecurityRpc.removeTotp({}),
      t.as(owner).AccountSecurityRpc.removePasskey({ id: passkey.id }),
    ]);
    assert.deepEqual(removals.map((settled) => settled.status).sort(), ['fulfilled', 'rejected']);
    const left = await t.as(owner).AccountSecurityRpc.getSecurity({});
    assert.equal(Number(left.authenticator) + left.passkeys, 1);

    const { ticket } = await stopped(staff.username, staff.password, 'ENROLMENT_REQUIRED');
    await t.as(staff).UserProfileRpc.changePassword({ currentPassword: staff.password, newPassword: 'changed before the thief enrols' });
    await refused(t.as(null).AccountSecurityRpc.beginTotpEnrolment({ ticket }), 'UNAUTHENTICATED');

    const anyone = await t.as(null).AccountSecurityRpc.beginPasskeySignIn({});
    assert.equal(anyone.options.userVerification, 'required');
  });
});
