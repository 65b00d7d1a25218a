import assert from 'node:assert/strict';
import { existsSync } from 'node:fs';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { refused } from '../../../test/support/caller.ts';
import { startTestApp, uniqueName, type Session, type TestApp } from '../../../test/support/harness.ts';
import { getFile, postUpload, putUpload, tinyPng } from '../../../test/support/uploads.ts';
import { dataOf, refusalOf } from '../../../test/support/wire.ts';
import { addUser } from '../../../test/support/users.ts';

const SELF_VIEW_FIELDS = [
  '_id',
  'email',
  'subscriptionId',
  'serviceCode',
  'username',
  'firstName',
  'lastName',
  'role',
  'isActive',
  'isVerified',
  'phoneNumber',
  'isPhoneVerified',
  'onboardingCompleted',
  'profilePicture',
  'jobTitle',
  'department',
  'oauthProfiles',
  'createdAt',
  'updatedAt',
].sort();

describe('UserProfileRpc: profile and password', () => {
  let t: TestApp;
  before(async () => {
    t = await startTestApp();
  });
  after(() => t.close());

  it('getUserProfile answers the self view of the calling user, without the password', async () => {
    const ann = await t.signup();
    const profile = await t.as(ann).UserProfileRpc.getUserProfile();
    assert.deepEqual(Object.keys(profile).sort(), SELF_VIEW_FIELDS);
    assert.equal(profile._id, ann.user._id);
    assert.equal(profile.subscriptionId, ann.subscriptionId);
    assert.equal(profile.profilePicture, null);
    const key = await t.as(ann).ApiKeyRpc.create({ description: 'k' });
    assert.equal((await t.as({ apiKey: key.fullKey }).UserProfileRpc.getUserProfile())._id, ann.user._id);
    await refused(t.as(null).UserProfileRpc.getUserProfile(), 'UNAUTHENTICATED');
  });

  it('updateUserProfile trims, sets and clears fields and leaves the others alone', async () => {
    const ann = await t.signup();
    const set = await t.as(ann).UserProfileRpc.updateUserProfile({ firstName: '  Ann ', lastName: 'Lee', jobTitle: 'Engineer', department: 'R&D' });
    assert.deepEqual([set.firstName, set.lastName, set.jobTitle, set.department], ['Ann', 'Lee', 'Engineer', 'R&D']);
    const cleared = await t.as(ann).UserProfileRpc.updateUserProfile({ jobTitle: null, department: '   ' });
    assert.deepEqual([cleared.firstName, cleared.lastName, cleared.jobTitle, cleared.department], ['Ann', 'Lee', null, null]);
    assert.ok(Date.parse(cleared.updatedAt) >= Date.parse(set.updatedAt));
    const read = await t.as(ann).UserProfileRpc.getUserProfile();
    assert.deepEqual(read, cleared);
  });

  it('updateUserProfile names each bad field and changes nothing', async () => {
    const ann = await t.signup();
    await t.as(ann).UserProfileRpc.updateUserProfile({ firstName: 'Ann' });
    const error = await refused(
      t.as(ann).call('UserProfileRpc.updateUserProfile', { firstName: 'Bea', lastName: 'x'.repeat(101), department: 42 }),
      'VALIDATION_ERROR',
    );
    assert.deepEqual(error.issues?.map((issue) => issue.path).sort(), ['department', 'lastName']);
    assert.match(error.message, /lastName must be at most 100 characters/);
    assert.equal((await t.as(ann).UserProfileRpc.getUserProfile()).firstName, 'Ann');
  });

  it('changePassword refuses a wrong current password and a short new one', async () => {
    const ann = await t.signup();
    const wrong = await refused(
      t.as(ann).UserProfileRpc.changePassword({ currentPassword: 'not my password', newPassword: 'a brand new password' }),
      'VALIDATION_ERROR',
    );
    assert.deepEqual(wrong.issues, [{ path: 'currentPassword', message: 'The password is incorrect' }]);
    const short = await refused(t.as(ann).UserProfileRpc.changePassword({ currentPassword: ann.password, newPassword: 'short' }), 'VALIDATION_ERROR');
    assert.deepEqual(
      short.issues?.map((issue) => issue.path),
      ['newPassword'],
    );
    // Neither changed anything: the old password still logs in.
    await t.as(null).AuthRpc.login({ identifier: ann.user.username, password: ann.password });
    assert.ok(!t.logs.some((line) => line.includes('not my password') || line.includes(ann.password)), 'no password in the logs');
  });

  it('changePassword swaps the password and ends every other session at once, but not the calling one', async () => {
    const ann = await t.signup();
    const elsewhere = await t.as(null).AuthRpc.login({ identifier: ann.user.username, password: ann.password });
    await t.as(elsewhere).AuthRpc.getSession(); // cached now: revocation must still apply at once
    const key = await t.as(ann).ApiKeyRpc.create({ description: 'script' });

    assert.equal(await t.as(ann).UserProfileRpc.changePassword({ currentPassword: ann.password, newPassword: 'a brand new password' }), true);

    await refused(t.as(elsewhere).AuthRpc.getSession(), 'UNAUTHENTICATED');
    assert.equal((await t.as(ann).AuthRpc.getSession()).user._id, ann.user._id);
    assert.equal((await t.as({ apiKey: key.fullKey }).AuthRpc.getSession()).user._id, ann.user._id, 'API keys are not sessions');

    await refused(t.as(null).AuthRpc.login({ identifier: ann.user.username, password: ann.password }), 'UNAUTHENTICATED');
    await t.as(null).AuthRpc.login({ identifier: ann.user.username, password: 'a brand new password' });
  });

  it('a user without a password cannot use changePassword', async () => {
    const name = uniqueName();
    const { token } = await t.as(null).AuthRpc.signup({ email: `${name}@example.com`, username: name });
    const error = await refused(
      t.as({ token }).UserProfileRpc.changePassword({ currentPassword: 'anything', newPassword: 'a brand new password' }),
      'BAD_REQUEST',
    );
    assert.match(error.message, /no password/);
  });
});

describe('UserProfileRpc.changePassword rate limit', () => {
  let t: TestApp;
  before(async () => {
    t = await startTestApp({ env: { LOGIN_FAILURE_LIMIT: '2' } });
  });
  after(() => t.close());

  it('counts failed attempts per user; past the limit even the right password is refused', async () => {
    const ann = await t.signup();
    const bob = await t.signup();
    const attempt = (account: Session, currentPassword: string) =>
      t.as(account).UserProfileRpc.changePassword({ currentPassword, newPassword: 'a brand new password' });
    await refused(attempt(ann, 'wrong one'), 'VALIDATION_ERROR');
    await refused(attempt(ann, 'wrong two'), 'VALIDATION_ERROR');
    const limited = await refused(attempt(ann, ann.password), 'RATE_LIMITED');
    assert.ok(Number(limited.retryAfter) > 0, `retry after ${limited.retryAfter}`);
    await t.as(null).AuthRpc.login({ identifier: ann.user.username, password: ann.password }); // unchanged
    // Another user's count is their own.
    assert.equal(await attempt(bob, bob.password), true);
  });
});

describe('UserProfileRpc: profile picture', () => {
  let t: TestApp;
  let ann: Session;
  before(async () => {
    t = await startTestApp();
    ann = await t.signup();
  });
  after(() => t.close());

  const newKey = async (account: Session = ann) => t.as(account).UserProfileRpc.getUploadKeyForProfilePicture();

  it('upload with PUT, set it, and read it back byte for byte; a second one replaces and deletes the first', async () => {
    const first = tinyPng(2, [10, 200, 10, 255]);
    const issued = await newKey();
    assert.match(issued.uploadKey, /^[A-Za-z0-9_-]{43}$/);
    assert.equal(issued.uploadUrl, `${t.url}/api/uploads/${issued.uploadKey}`);
    assert.ok(Date.parse(issued.expiresAt) > Date.now() + 14 * 60_000);
    const put = await fetch(issued.uploadUrl, {
      method: 'PUT',
      headers: { authorization: `Bearer ${ann.token}`, 'content-type': 'image/png', 'x-file-name': 'me.png' },
      body: new Uint8Array(first),
    });
    assert.equal(put.status, 200);
    const [uploaded] = (await put.json()).data.files;

    const profile = await t.as(ann).UserProfileRpc.updateProfilePicture({ uploadKey: issued.uploadKey });
    assert.equal(profile.profilePicture, `/api/files/${uploaded.fileId}`);
    assert.deepEqual(await t.as(ann).UserProfileRpc.getUserProfile(), profile);
    const served = await getFile(t, profile.profilePicture!, { token: ann.token });
    assert.equal(served.status, 200);
    assert.equal(served.headers.get('content-type'), 'image/png');
    assert.ok(served.bytes.equals(first));
    // Any user of the subscription sees it.
    const colleague = await addUser(t, ann.subscriptionId, 'user');
    assert.ok((await getFile(t, profile.profilePicture!, { token: colleague.token })).bytes.equals(first));

    const second = tinyPng(5, [10, 10, 200, 255]);
    const next = await newKey();
    const posted = await postUpload(t, next.uploadKey, [{ bytes: second, type: 'image/png', name: 'me-too.png' }], { token: ann.token });
    assert.equal(posted.status, 200, JSON.stringify(posted.body));
    const replaced = await t.as(ann).UserProfileRpc.updateProfilePicture({ uploadKey: next.uploadKey });
    assert.equal(replaced.profilePicture, `/api/files/${dataOf(posted.body).files[0]!.fileId}`);
    assert.ok((await getFile(t, replaced.profilePicture!, { token: ann.token })).bytes.equals(second));
    assert.equal((await getFile(t, profile.profilePicture!, { token: ann.token })).status, 404);
    assert.equal(existsSync(path.join(t.dataDir, 'files', ann.subscriptionId, uploaded.fileId)), false);
  });

  it('finalizing without an upload fails and changes nothing; the key then still works once', async () => {
    const before = await t.as(ann).UserProfileRpc.getUserProfile();
    const { uploadKey } = await newKey();
    const early = await refused(t.as(ann).UserProfileRpc.updateProfilePicture({ uploadKey }), 'BAD_REQUEST');
    assert.match(early.message, /No picture has been uploaded/);
    assert.deepEqual(await t.as(ann).UserProfileRpc.getUserProfile(), before);

    assert.equal((await putUpload(t, uploadKey, tinyPng(), 'image/png', { token: ann.token })).status, 200);
    await t.as(ann).UserProfileRpc.updateProfilePicture({ uploadKey });
    const reused = await refused(t.as(ann).UserProfileRpc.updateProfilePicture({ uploadKey }), 'BAD_REQUEST');
    assert.match(reused.message, /already been used/);
  });

  it('refuses what is not an accepted picture, and a second file for the same key', async () => {
    const { uploadKey } = await newKey();
    const text = await putUpload(t, uploadKey, Buffer.from('hello'), 'image/png', { token: ann.token });
    assert.equal(text.status, 400);
    assert.equal(refusalOf(text.body).code, 'VALIDATION_ERROR');
    const declaredText = await putUpload(t, uploadKey, tinyPng(), 'text/plain', { token: ann.token });
    assert.equal(declaredText.status, 400);
    assert.equal(refusalOf(declaredText.body).code, 'VALIDATION_ERROR');
    assert.equal((await putUpload(t, uploadKey, tinyPng(), 'image/png', { token: ann.token })).status, 200);
    const extra = await putUpload(t, uploadKey, tinyPng(), 'image/png', { token: ann.token });
    assert.equal(extra.status, 400);
    assert.match(refusalOf(extra.body).error, /at most 1 file\b/);
  });

  it('an expired key cannot be finalized', async () => {
    const { uploadKey } = await newKey();
    assert.equal((await putUpload(t, uploadKey, tinyPng(), 'image/png', { token: ann.token })).status, 200);
    await t.app.deps.db.execute(`update core_upload_key set expires_at = now() - interval '1 second' where user_id = ? and used_at is null`, [ann.user._id]);
    const late = await refused(t.as(ann).UserProfileRpc.updateProfilePicture({ uploadKey }), 'BAD_REQUEST');
    assert.match(late.message, /expired/);
  });

  it("another user's key, in this subscription or another, is not found, and their picture stays", async () => {
    const picture = tinyPng(3);
    const { uploadKey } = await newKey();
    assert.equal((await putUpload(t, uploadKey, picture, 'image/png', { token: ann.token })).status, 200);
    const colleague = await addUser(t, ann.subscriptionId, 'admin');
    const stranger = await t.signup();
    for (const intruder of [colleague, stranger]) {
      await refused(t.as(intruder).UserProfileRpc.updateProfilePicture({ uploadKey }), 'NOT_FOUND');
      assert.equal((await t.as(intruder).UserProfileRpc.getUserProfile()).profilePicture, null);
    }
    const mine = await t.as(ann).UserProfileRpc.updateProfilePicture({ uploadKey });
    assert.equal((await getFile(t, mine.profilePicture!, { token: stranger.token })).status, 404);
    assert.ok((await getFile(t, mine.profilePicture!, { token: colleague.token })).bytes.equals(picture));
  });

  it('needs a credential', async () => {
    for (const method of ['getUploadKeyForProfilePicture', 'updateProfilePicture', 'changePassword', 'updateUserProfile']) {
      await refused(t.as(null).call(`UserProfileRpc.${method}`, {}), 'UNAUTHENTICATED', method);
    }
    const { uploadKey } = await newKey();
    assert.equal((await putUpload(t, uploadKey, tinyPng(), 'image/png')).status, 401);
  });
});

describe('UserProfileRpc.verifyUserChannel', () => {
  let t: TestApp;
  before(async () => {
    t = await startTestApp(); // no channel configured: codes land in the outbox
  });
  after(() => t.close());

  /** Requests a code and reads it from the outbox, as an operator of the embedded default would. */
  const outboxCode = async (channelType: 'email' | 'sms', identifier: string) => {
    const { otpRequestId } = await t.as(null).AuthRpc.requestVerificationCode({ channelType, identifier });
    const rows = await t.app.deps.db.execute<{ body: string }>('select body from auth_outbox order by created_at desc limit 1');
    return { otpRequestId, code: /code is (\d{6})/.exec(rows[0]!.body)![1]! };
  };

  it('verifies the account e-mail address with a code sent to it', async () => {
    const account = await t.signup();
    const { otpRequestId, code } = await outboxCode('email', account.user.email);
    const wrong = await refused(
      t.as(account).UserProfileRpc.verifyUserChannel({
        otpRequestId,
        code: code === '000000' ? '111111' : '000000',
        identifier: account.user.email,
        channelType: 'email',
      }),
      'VALIDATION_ERROR',
    );
    assert.equal(wrong.issues?.[0]?.path, 'code');
    const done = await t
      .as(account)
      .UserProfileRpc.verifyUserChannel({ otpRequestId, code, identifier: account.user.email.toUpperCase(), channelType: 'email' });
    assert.deepEqual(done, { success: true, message: 'E-mail address verified' });
    assert.equal((await t.as(account).UserProfileRpc.getUserProfile()).isVerified, true);
  });

  it('refuses an address that is not the account e-mail, and a code sent elsewhere', async () => {
    const account = await t.signup();
    const other = `${uniqueName('elsewhere')}@example.com`;
    const foreign = await outboxCode('email', other);
    const notMine = await refused(t.as(account).UserProfileRpc.verifyUserChannel({ ...foreign, identifier: other, channelType: 'email' }), 'VALIDATION_ERROR');
    assert.equal(notMine.issues?.[0]?.path, 'identifier');
    const mismatch = await refused(
      t.as(account).UserProfileRpc.verifyUserChannel({ ...foreign, identifier: account.user.email, channelType: 'email' }),
      'VALIDATION_ERROR',
    );
    assert.equal(mismatch.issues?.[0]?.path, 'otpRequestId');
    assert.equal((await t.as(account).UserProfileRpc.getUserProfile()).isVerified, false);
  });

  it('verifies a phone number, which becomes the account number', async () => {
    const account = await t.signup();
    const sms = await outboxCode('sms', '+1 555 765 4321');
    const otherNumber = await refused(
      t.as(account).UserProfileRpc.verifyUserChannel({ ...sms, identifier: '+15550000000', channelType: 'phone' }),
      'VALIDATION_ERROR',
    );
    assert.equal(otherNumber.issues?.[0]?.path, 'otpRequestId');
    // The refused attempt left the code unused.
    assert.deepEqual(await t.as(account).UserProfileRpc.verifyUserChannel({ ...sms, identifier: '+1 555-765-4321', channelType: 'phone' }), {
      success: true,
      message: 'Phone number verified',
    });
    const profile = await t.as(account).UserProfileRpc.getUserProfile();
    assert.deepEqual([profile.phoneNumber, profile.isPhoneVerified], ['+15557654321', true]);
  });
});
