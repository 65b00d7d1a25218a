import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { refused, type Credential } from '../../../test/support/caller.ts';
import { startTestApp, uniqueName, type RpcResponse, type TestApp } from '../../../test/support/harness.ts';
import { acmeProviderEnv, startOpenIdProvider, TestBrowser } from '../../../test/support/oidc.ts';
import { startHttpReceiver } from '../../../test/support/peers.ts';

/**
 * Joining an account someone else may have made (an administrator registered
 * the person's address and knows its password): whether the person proves the
 * address with a provider or with a code, they are asked first, and joining
 * ends every credential someone else may hold for the account.
 */
describe('joining an account an administrator made for your address', () => {
  let t: TestApp;
  let idp: Awaited<ReturnType<typeof startOpenIdProvider>>;
  let receiver: Awaited<ReturnType<typeof startHttpReceiver>>;

  before(async () => {
    idp = await startOpenIdProvider();
    receiver = await startHttpReceiver();
    t = await startTestApp({
      withNotes: false,
      env: {
        ...acmeProviderEnv(idp.issuer),
        // The webhook receiver listens on loopback.
        OUTBOUND_ALLOW_PRIVATE: 'true',
      },
    });
    idp.configure([`${t.url}/auth/acme/callback`]);
  });
  after(async () => {
    await t?.close();
    await idp?.close();
    await receiver?.close();
  });

  const host = () => new URL(t.url).host;

  /**
   * An admin registers `email` for a user of their subscription, logs in as it with the password they chose, and
   * makes an API key as it with a webhook: every credential they could keep for the person's account.
   */
  const planted = async () => {
    const admin = await t.signup();
    const name = uniqueName('person');
    const email = `${name}@example.com`;
    const user = await t.as(admin).AdminUserRpc.create({ email, username: name, password: 'chosen by the admin', role: 'user', isVerified: true });
    const asPerson = await t.as(null).AuthRpc.login({ identifier: email, password: 'chosen by the admin' });
    const key = await t.as(asPerson).ApiKeyRpc.create({ description: 'kept by the admin' });
    const byKey = t.as({ apiKey: key.fullKey });
    const hook = await byKey.ApiManagementRpc.registerWebhook({ webhookUrl: `${receiver.url}/${name}` });
    assert.equal(hook.status, 'verified');
    // The key works, and its webhook is one the subscription's events go to.
    assert.equal((await byKey.AuthRpc.getSession()).user._id, user._id);
    await byKey.MemoryRpc.listMemories({ scope: 'user' });
    assert.ok((await webhookKeys(admin)).includes(key._id));
    return { admin, name, email, user, asPerson, key };
  };
  const webhookKeys = async (admin: Credential) => (await t.as(admin).ApiManagementRpc.listApiKeysForWebhook()).map((entry) => entry.value);

  /** What the admin kept no longer works: the password, the session it gave, the API key and its webhook. */
  const adminLockedOut = async ({ admin, email, asPerson, key }: Awaited<ReturnType<typeof planted>>) => {
    await refused(t.as(null).AuthRpc.login({ identifier: email, password: 'chosen by the admin' }), 'UNAUTHENTICATED', 'the password the admin chose');
    await refused(t.as(asPerson).AuthRpc.getSession(), 'UNAUTHENTICATED', 'the session it gave');
    const byKey = t.as({ apiKey: key.fullKey });
    await refused(byKey.AuthRpc.getSession(), 'UNAUTHENTICATED', 'the API key the admin made as the account');
    await refused(byKey.MemoryRpc.listMemories({ scope: 'user' }), 'UNAUTHENTICATED', 'nor reads the memories');
    assert.ok(!(await webhookKeys(admin)).includes(key._id), 'its webhook is sent nothing more');
  };

  /** A code for `address`, read from the outbox (no mail server here). */
  const requestCode = async (address: string) => {
    const { otpRequestId } = await t.as(null).AuthRpc.requestVerificationCode({ channelType: 'email', identifier: address });
    const [row] = await t.app.deps.db.execute<{ body: string }>('select body from auth_outbox where recipient = ? order by created_at desc limit 1', [address]);
    return { otpRequestId, code: /\b(\d{6})\b/.exec(row!.body)![1]! };
  };
  /** The cookies a response sets, as a Cookie header would send them back (a code login that asks first answers with the question's cookie, over HTTP). */
  const cookiesOf = (response: RpcResponse | Response) =>
    response.headers
      .getSetCookie()
      .map((line) => line.split(';')[0]!)
      .filter((pair) => !pair.endsWith('='))
      .join('; ');
  const answer = (decision: string, cookie?: string) =>
    fetch(`${t.url}/auth/join?decision=${decision}`, { method: 'POST', redirect: 'manual', headers: cookie ? { cookie } : {} });

  /** A provider sign-in of the provider account `sub` in a new browser; joins when asked. */
  const providerSignIn = async (sub: string) => {
    const browser = new TestBrowser();
    const landed = await browser.signInAt(`${t.url}/auth/acme`, sub, idp.issuer);
    if (landed.status === 200 && /\/auth\/join/.test(await landed.text())) {
      assert.equal((await browser.post(`${t.url}/auth/join?decision=join`, {})).status, 302);
    }
    const token = browser.cookie(host(), 'session')!;
    return { id: (await t.as({ token }).AuthRpc.getSession()).user._id, token };
  };
  /** A code for `phone` by SMS, read from the outbox. */
  const smsCode = async (phone: string) => {
    const { otpRequestId } = await t.as(null).AuthRpc.requestVerificationCode({ channelType: 'sms', identifier: phone });
    const [row] = await t.app.deps.db.execute<{ body: string }>('select body from auth_outbox where channel = ? order by created_at desc limit 1', ['sms']);
    return { otpRequestId, code: /\b(\d{6})\b/.exec(row!.body)![1]! };
  };

  /**
   * Ways back into the account that are not credentials of its own: the admin links their own provider account to
   * it (it had the admin's address, then they gave it the person's), verifies their phone on it, and schedules a
   * task that acts as it (signed in through their link). Answers the provider account and the phone number, and the task's id.
   */
  const waysBack = async () => {
    const admin = await t.signup();
    const name = uniqueName('person');
    const email = `${name}@example.com`;
    const adminSub = uniqueName('admin-sub');
    const adminAddress = `${adminSub}@example.com`;
    const user = await t
      .as(admin)
      .AdminUserRpc.create({ email: adminAddress, username: name, password: 'chosen by the admin', role: 'user', isVerified: true });
    idp.accounts.set(adminSub, { email: adminAddress });
    const linked = await providerSignIn(adminSub);
    assert.equal(linked.id, user._id, 'the admin links their provider account');
    await t.as(admin).AdminUserRpc.update({ _id: user._id, email });
    const asPerson = await providerSignIn(adminSub);
    assert.equal(asPerson.id, user._id, 'the link holds after the address changed');
    const phone = `+1555${String(Math.floor(Math.random() * 1e7)).padStart(7, '0')}`;
    await t.as(asPerson).UserProfileRpc.verifyUserChannel({ ...(await smsCode(phone)), identifier: phone, channelType: 'phone' });
    assert.equal((await t.as(null).AuthRpc.login(await smsCode(phone))).user._id, user._id, 'the phone signs in');

    const taskConfig = { name: 'Send out', schedule: '0 9 * * *', actionType: 'event' as const, actionConfig: { eventName: 'memories.out', eventData: {} } };
    const taskId = await t.as(asPerson).SchedulerRpc.create({ taskConfig });
    return { user, email, adminSub, phone, taskId };
  };

  /** None of the ways back leads in: the link, the phone and the task are gone or stopped; `token` is the person's session. */
  const waysBackClosed = async ({ user, adminSub, phone, taskId }: Awaited<ReturnType<typeof waysBack>>, token: string) => {
    assert.notEqual((await providerSignIn(adminSub)).id, user._id, "the admin's provider account no longer signs in as the account");
    await refused(t.as(null).AuthRpc.login(await smsCode(phone)), 'UNAUTHENTICATED', "the admin's phone no longer signs in");
    const person = t.as({ token });
    const profile = await person.UserProfileRpc.getUserProfile();
    assert.deepEqual([profile.phoneNumber, profile.isPhoneVerified], [null, false]);
    const task = await person.SchedulerRpc.findById({ taskId });
    assert.deepEqual([task.enabled, task.nextRun], [false, null], 'the task saved as the account waits for the person');
    assert.equal(await person.SchedulerRpc.enable({ taskId }), true, 'the person may enable it again');
  };

  it('joining through a provider removes every other provider link, the phone, and stops the tasks acting as the account', async () => {
    const planting = await waysBack();
    const sub = uniqueName('sub');
    idp.accounts.set(sub, { email: planting.email });
    assert.equal((await providerSignIn(sub)).id, planting.user._id);
    const { id, token } = await providerSignIn(sub);
    assert.equal(id, planting.user._id, "the join's own link stays");
    await waysBackClosed(planting, token);
  });

  it('joining with a code removes every provider link, the phone, and stops the tasks acting as the account', async () => {
    const planting = await waysBack();
    // Over HTTP: the question comes with a cookie the answer sends back.
    const again = await t.call('AuthRpc.login', await requestCode(planting.email));
    assert.equal(again.body.data.code, 'CONFIRM_JOIN');
    const joined = await answer('join', cookiesOf(again));
    assert.equal(joined.status, 302);
    const token = /(?:^|; )session=([^;]+)/.exec(cookiesOf(joined))![1]!;
    await waysBackClosed(planting, token);
  });

  it('joining through a provider ends the API keys (and their webhooks) someone else made as the account', async () => {
    const planting = await planted();
    const sub = uniqueName('sub');
    idp.accounts.set(sub, { email: planting.email });
    const browser = new TestBrowser();
    const question = await browser.signInAt(`${t.url}/auth/acme`, sub, idp.issuer);
    assert.equal(question.status, 200);
    assert.match(await question.text(), /API keys/);
    const joined = await browser.post(`${t.url}/auth/join?decision=join`, {});
    assert.equal(joined.status, 302);
    const person = t.as({ token: browser.cookie(host(), 'session')! });
    assert.equal((await person.AuthRpc.getSession()).user._id, planting.user._id);

    await adminLockedOut(planting);
    assert.deepEqual((await person.ApiKeyRpc.getData()).data, []);
  });

  it('a code login into an account an admin made asks before joining; joining ends every credential the admin kept', async () => {
    const planting = await planted();
    const { admin, name, email, user } = planting;

    // The code proves the address, but the account's password is the admin's: nothing happens before the person answers.
    // Over HTTP: the question comes with a cookie the answer sends back.
    const first = await t.call('AuthRpc.login', await requestCode(email));
    assert.equal(first.status, 409, JSON.stringify(first.body));
    assert.equal(first.body.data.code, 'CONFIRM_JOIN');
    assert.match(first.body.data.error, /\/auth\/join/);
    assert.ok(!cookiesOf(first).includes('session='), 'no session before the person answers');
    const asked = await fetch(`${t.url}/auth/join`, { headers: { cookie: cookiesOf(first) } });
    assert.equal(asked.status, 200);
    const page = await asked.text();
    assert.ok(page.includes(admin.user.username) && page.includes(name), 'the question names the tenant and the account');
    assert.match(page, /<form method="post" action="\/auth\/join\?decision=join">/);
    await t.as(null).AuthRpc.login({ identifier: email, password: 'chosen by the admin' }); // the password stays until then

    // Another browser (or site) cannot answer; the person declines: nothing changes, and the address was not marked proven.
    assert.equal((await answer('join')).status, 400);
    const declined = await answer('cancel', cookiesOf(first));
    assert.equal(declined.status, 200);
    assert.match(await declined.text(), /Nothing was linked/);
    assert.equal((await answer('join', cookiesOf(first))).status, 400, 'an answered question is gone');
    await t.as({ apiKey: planting.key.fullKey }).AuthRpc.getSession();
    const again = await t.call('AuthRpc.login', await requestCode(email));
    assert.equal(again.body.data.code, 'CONFIRM_JOIN', 'declining proves nothing: the next code asks again');

    const joined = await answer('join', cookiesOf(again));
    assert.equal(joined.status, 302);
    const token = /(?:^|; )session=([^;]+)/.exec(cookiesOf(joined))![1]!;
    const person = await t.as({ token }).AuthRpc.getSession();
    assert.equal(person.user._id, user._id);
    assert.equal(person.subscriptionId, admin.subscriptionId);
    await adminLockedOut(planting);

    // Joined: the address is proven the person's, so the next code signs in at once.
    const next = await t.as(null).AuthRpc.login(await requestCode(email));
    assert.equal(next.user._id, user._id);
  });

  it('a code login into an account whose owner proved the address signs in at once, and keeps its password', async () => {
    const name = uniqueName('owner');
    const email = `${name}@example.com`;
    await t.as(null).AuthRpc.signup({ email, username: name, password: 'the owner password', verifications: { email: await requestCode(email) } });
    const session = await t.as(null).AuthRpc.login(await requestCode(email));
    assert.equal(session.user.username, name);
    await t.as(null).AuthRpc.login({ identifier: email, password: 'the owner password' });
  });
});
