import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import type { AuthRpcCreateExternalOAuthLoginSessionResult } from '../../../test/support/caller.ts';
import { totpCode } from '../../../test/support/authenticator.ts';
import { refused } from '../../../test/support/caller.ts';
import { startTestApp, uniqueName, type TestApp } from '../../../test/support/harness.ts';
import { acmeProviderEnv, startOpenIdProvider, TestBrowser } from '../../../test/support/oidc.ts';

describe('OAuth login with an OpenID provider', () => {
  let t: TestApp;
  let idp: Awaited<ReturnType<typeof startOpenIdProvider>>;

  before(async () => {
    idp = await startOpenIdProvider();
    t = await startTestApp({
      env: {
        ...acmeProviderEnv(idp.issuer),
      },
    });
    idp.configure([`${t.url}/auth/acme/callback`]);
  });
  // Either may be missing when start-up failed; the provider must close anyway, or the file never ends.
  after(async () => {
    await t?.close();
    await idp?.close();
  });

  const host = () => new URL(t.url).host;
  /** The session a browser holds (its cookie), to call as it. */
  const sessionOf = (browser: TestBrowser) => t.as({ token: browser.cookie(host(), 'session')! });
  /** What polling an external-browser login answers. */
  const poll = (started: AuthRpcCreateExternalOAuthLoginSessionResult) =>
    t.as(null).AuthRpc.pollExternalOAuthLoginSession({ sessionId: started.sessionId, pollToken: started.pollToken });
  /** The poll of an external-browser login that must have completed. */
  const completedLogin = async (started: AuthRpcCreateExternalOAuthLoginSessionResult) => {
    const answer = await poll(started);
    if (answer.status !== 'completed') assert.fail(`the login completed: ${JSON.stringify(answer)}`);
    return answer;
  };

  it('lists the provider and its login path', async () => {
    assert.deepEqual((await t.as(null).AuthRpc.getClientConfig()).oauthProviders, ['acme']);
    assert.deepEqual(await t.as(null).AuthRpc.getOAuthLoginUrl({ provider: 'acme' }), { url: '/auth/acme' });
    await refused(t.as(null).AuthRpc.getOAuthLoginUrl({ provider: 'nope' }), 'NOT_FOUND');
  });

  it('answers FEATURE_UNAVAILABLE with the settings to set for a preset that is not configured, NOT_FOUND for an unknown name', async () => {
    for (const preset of ['google', 'gitlab', 'apple']) {
      const settings = ['OAUTH_PROVIDERS', `OAUTH_${preset.toUpperCase()}_CLIENT_ID`, `OAUTH_${preset.toUpperCase()}_CLIENT_SECRET`];
      for (const method of ['getOAuthLoginUrl', 'createExternalOAuthLoginSession'] as const) {
        const error = await refused(t.as(null).AuthRpc[method]({ provider: preset }), 'FEATURE_UNAVAILABLE', `${method} ${preset}`);
        for (const name of settings) assert.ok(error.message.includes(name), `${method} ${preset}: ${error.message} names ${name}`);
      }
      // The browser routes answer the same way, on a page.
      for (const route of [`/auth/${preset}`, `/auth/${preset}/callback?code=abc&state=xyz`]) {
        const page = await fetch(`${t.url}${route}`, { redirect: 'manual' });
        assert.equal(page.status, 503, route);
        assert.ok((await page.text()).includes(`OAUTH_${preset.toUpperCase()}_CLIENT_ID`), route);
      }
    }
    // Case does not matter, as for configured providers.
    await refused(t.as(null).AuthRpc.getOAuthLoginUrl({ provider: 'Google' }), 'FEATURE_UNAVAILABLE');

    for (const unknown of ['nope', 'constructor']) {
      await refused(t.as(null).AuthRpc.getOAuthLoginUrl({ provider: unknown }), 'NOT_FOUND', unknown);
      await refused(t.as(null).AuthRpc.createExternalOAuthLoginSession({ provider: unknown }), 'NOT_FOUND', unknown);
      assert.equal((await fetch(`${t.url}/auth/${unknown}`, { redirect: 'manual' })).status, 404);
    }
  });

  it('signs a new user up through the browser flow, with state and PKCE, and starts a session', async () => {
    const sub = uniqueName('sub');
    idp.accounts.set(sub, { email: `${sub}@example.com`, givenName: 'Ida' });
    const browser = new TestBrowser();
    const start = await browser.get(`${t.url}/auth/acme`);
    assert.equal(start.status, 302);
    const authorize = new URL(start.headers.get('location')!);
    assert.equal(authorize.origin, idp.issuer);
    assert.equal(authorize.searchParams.get('code_challenge_method'), 'S256');
    assert.ok(authorize.searchParams.get('state'));
    assert.ok(authorize.searchParams.get('nonce'));
    assert.equal(authorize.searchParams.get('redirect_uri'), `${t.url}/auth/acme/callback`);

    const done = await browser.signInAt(authorize.toString(), sub, idp.issuer);
    assert.equal(done.status, 302, await done.clone().text());
    const token = browser.cookie(host(), 'session');
    assert.ok(token, 'the callback set the session cookie');
    const session = await t.as({ token }).AuthRpc.getSession();
    assert.equal(session.user.email, `${sub}@example.com`);
    assert.equal(session.user.isVerified, true);
    assert.equal(session.user.role, 'admin');
    assert.equal(session.user.firstName, 'Ida');
    assert.deepEqual(session.user.oauthProfiles, [{ provider: 'acme', id: sub }]);

    // The same person again: the same account, found by the provider profile.
    const again = new TestBrowser();
    await again.signInAt(`${t.url}/auth/acme`, sub, idp.issuer);
    assert.equal((await sessionOf(again).AuthRpc.getSession()).user._id, session.user._id);
  });

  it('gives a new user a free username, never a reserved one', async () => {
    const sub = uniqueName('reserved');
    idp.accounts.set(sub, { email: `admin@${sub.toLowerCase()}.example.com` });
    const browser = new TestBrowser();
    await browser.signInAt(`${t.url}/auth/acme`, sub, idp.issuer);
    const session = await sessionOf(browser).AuthRpc.getSession();
    assert.match(session.user.username, /^admin-[A-Za-z0-9]{4}$/);
  });

  /** Signs in at the provider as `sub` in a new browser and answers the session the app gave it. */
  const signInAs = async (sub: string, email = `${sub}@example.com`) => {
    idp.accounts.set(sub, { email });
    const browser = new TestBrowser();
    await browser.signInAt(`${t.url}/auth/acme`, sub, idp.issuer);
    return sessionOf(browser).AuthRpc.getSession();
  };
  /** Signs in at the provider as `sub` in a new browser that lands on the app's question whether to join an existing account. */
  const askedAs = async (sub: string, email: string, start = `${t.url}/auth/acme`) => {
    idp.accounts.set(sub, { email });
    const browser = new TestBrowser();
    const page = await browser.signInAt(start, sub, idp.issuer);
    assert.equal(page.status, 200);
    const text = await page.text();
    assert.match(text, /<form method="post" action="\/auth\/join\?decision=join">/, text);
    assert.equal(browser.cookie(host(), 'session'), undefined, 'no session before the person answers');
    return { browser, text };
  };
  /** The code the outbox holds for an address (no mail server in this file: codes go to auth_outbox). */
  const outboxCode = async (address: string) => {
    const [row] = await t.app.deps.db.execute<{ body: string }>('select body from auth_outbox where recipient = ? order by created_at desc limit 1', [address]);
    return /\b(\d{6})\b/.exec(row!.body)![1]!;
  };
  /** A signup whose owner proved the address with a code sent to it. */
  const provenSignup = async () => {
    const name = uniqueName('proven');
    const email = `${name}@example.com`;
    const { otpRequestId } = await t.as(null).AuthRpc.requestVerificationCode({ channelType: 'email', identifier: email });
    const code = await outboxCode(email);
    const data = await t.as(null).AuthRpc.signup({ email, username: name, password: 'owner password', verifications: { email: { otpRequestId, code } } });
    return { email, token: data.token, user: data.user, subscriptionId: data.subscriptionId };
  };

  it('links a first sign-in at once to an account whose owner proved the address with a code, keeping their password', async () => {
    const owner = await provenSignup();
    const sub = uniqueName('owner');
    const session = await signInAs(sub, owner.email.toUpperCase());
    assert.equal(session.user._id, owner.user._id);
    assert.deepEqual(session.user.oauthProfiles, [{ provider: 'acme', id: sub }]);
    await t.as(null).AuthRpc.login({ identifier: owner.email, password: 'owner password' }); // the password stays
    await t.as(owner).AuthRpc.getSession(); // so do the sessions
  });

  it('links a first sign-in at once to an account its owner made by signing in with a provider before', async () => {
    const first = uniqueName('first');
    const made = await signInAs(first);
    const second = uniqueName('second');
    const again = await signInAs(second, `${first}@example.com`);
    assert.equal(again.user._id, made.user._id);
    assert.deepEqual(again.user.oauthProfiles, [
      { provider: 'acme', id: first },
      { provider: 'acme', id: second },
    ]);
  });

  for (const isVerified of [true, false]) {
    it(`an address an admin registered (isVerified ${isVerified}) does not capture its owner's first sign-in: they are asked, and joining ends the admin's password`, async () => {
      const admin = await t.signup();
      const sub = uniqueName('person');
      const email = `${sub}@example.com`;
      const byAdmin = t.as(admin).AdminUserRpc;
      const planted = await byAdmin.create({ email, username: sub, password: 'chosen by the admin', role: 'user', isVerified });
      const adminAsPerson = await t.as(null).AuthRpc.login({ identifier: email, password: 'chosen by the admin' });

      const first = await askedAs(sub, email);
      assert.ok(first.text.includes(admin.user.username), 'the question names the tenant');
      const unlinked = await byAdmin.findById({ id: planted._id });
      assert.deepEqual(unlinked.oauthProfiles, [], 'nothing is linked before the person answers');

      // A confirmation from a browser that was not asked does nothing, nor does one sent from another site (no cookie).
      assert.equal((await new TestBrowser().post(`${t.url}/auth/join?decision=join`, {})).status, 400);
      const declined = await first.browser.post(`${t.url}/auth/join?decision=cancel`, {});
      assert.equal(declined.status, 200);
      assert.match(await declined.text(), /Nothing was linked/);
      assert.equal(first.browser.cookie(host(), 'session') ?? '', '');
      assert.equal((await first.browser.post(`${t.url}/auth/join?decision=join`, {})).status, 400, 'an answered question is gone');
      assert.deepEqual((await byAdmin.findById({ id: planted._id })).oauthProfiles, []);

      const second = await askedAs(sub, email);
      const joined = await second.browser.post(`${t.url}/auth/join?decision=join`, {});
      assert.equal(joined.status, 302);
      const session = await sessionOf(second.browser).AuthRpc.getSession();
      assert.equal(session.user._id, planted._id);
      assert.equal(session.subscriptionId, admin.subscriptionId);

      // The password the admin chose, and the session it gave, end with the link.
      await refused(t.as(null).AuthRpc.login({ identifier: email, password: 'chosen by the admin' }), 'UNAUTHENTICATED');
      await refused(t.as(adminAsPerson).AuthRpc.getSession(), 'UNAUTHENTICATED');
      const linked = await byAdmin.findById({ id: planted._id });
      assert.deepEqual(linked.oauthProfiles, [{ provider: 'acme', id: sub, email, linked: true }]);
      assert.equal(linked.isVerified, true);

      // Linked now: the next sign-in asks nothing.
      assert.equal((await signInAs(sub, email)).user._id, planted._id);
    });
  }

  it('asks before an address an admin wrote over a proven one, and an external-browser login waits for the answer', async () => {
    const owner = await provenSignup();
    const sub = uniqueName('victim');
    const email = `${sub}@example.com`;
    await t.as(owner).AdminUserRpc.update({ _id: owner.user._id, email });
    const started = await t.as(null).AuthRpc.createExternalOAuthLoginSession({ provider: 'acme' });
    const { browser } = await askedAs(sub, email, started.loginUrl);
    assert.deepEqual(await poll(started), { status: 'pending' });
    const declined = await browser.post(`${t.url}/auth/join?decision=cancel`, {});
    assert.equal(declined.status, 200);
    assert.deepEqual(await poll(started), { status: 'expired' });

    const restarted = await t.as(null).AuthRpc.createExternalOAuthLoginSession({ provider: 'acme' });
    const asked = await askedAs(sub, email, restarted.loginUrl);
    const joined = await asked.browser.post(`${t.url}/auth/join?decision=join`, {});
    assert.equal(joined.status, 200);
    assert.match(await joined.text(), /You can close this window/);
    const completed = await completedLogin(restarted);
    assert.equal(completed.user._id, owner.user._id);
  });

  /** The message of the issue on `path` of a call refused as invalid. */
  const refusedOn = async (call: Promise<unknown>, path: string) => {
    const error = await refused(call, 'VALIDATION_ERROR');
    const issue = error.issues?.find((found) => found.path === path);
    assert.ok(issue, `an issue on ${path}: ${JSON.stringify(error.issues)}`);
    return issue.message;
  };

  it('a provider account an admin declares on a user of their own is data: it signs nobody in, and its owner still signs into their own account', async () => {
    const sub = uniqueName('person');
    const person = await signInAs(sub);
    const x = await t.signup();
    const claim = [{ provider: 'acme', id: sub }];
    const decoy = uniqueName('decoy');
    const byX = t.as(x).AdminUserRpc;
    const created = await byX.create({ email: `${decoy}@example.com`, username: decoy, password: 'decoy password', role: 'user', oauthProfiles: claim });
    assert.deepEqual(created.oauthProfiles, [{ provider: 'acme', id: sub, linked: false }]);
    const updated = await byX.update({ _id: x.user._id, oauthProfiles: claim });
    assert.deepEqual(updated.oauthProfiles, [{ provider: 'acme', id: sub, linked: false }]);

    // Claiming it as a link is refused, with the same answer for a provider account nobody has: tenant X learns nothing of others.
    const onUpdate = await refusedOn(byX.update({ _id: x.user._id, firstName: 'Mallory', oauthProfiles: [{ ...claim[0]!, linked: true }] }), 'oauthProfiles.0');
    assert.match(onUpdate, /only by signing in/);
    const nobody = [{ provider: 'acme', id: uniqueName('nobody'), linked: true }];
    assert.equal(await refusedOn(byX.update({ _id: x.user._id, oauthProfiles: nobody }), 'oauthProfiles.0'), onUpdate);
    assert.equal((await byX.findById({ id: x.user._id })).firstName, null, 'nothing was changed');

    const again = await signInAs(sub);
    assert.equal(again.user._id, person.user._id);
    assert.equal(again.subscriptionId, person.subscriptionId);
    assert.deepEqual(again.user.oauthProfiles, [{ provider: 'acme', id: sub }]);

    // Whatever writes, the database holds one user per provider account.
    await assert.rejects(
      t.app.deps.db.execute(`insert into auth_oauth_link (provider, subject, user_id, subscription_id, created_at) values ('acme', ?, ?, ?, now())`, [
        sub,
        x.user._id,
        x.subscriptionId,
      ]),
      /duplicate key|unique/i,
    );
  });

  it('a provider account an admin declared before its owner ever signed in signs its owner into an account of their own (external-browser flow)', async () => {
    const sub = uniqueName('newcomer');
    const x = await t.signup();
    await t.as(x).AdminUserRpc.update({ _id: x.user._id, oauthProfiles: [{ provider: 'acme', id: sub }] });
    idp.accounts.set(sub, { email: `${sub}@example.com` });
    const started = await t.as(null).AuthRpc.createExternalOAuthLoginSession({ provider: 'acme' });
    await new TestBrowser().signInAt(started.loginUrl, sub, idp.issuer);
    const completed = await completedLogin(started);
    const owner = await t.as(completed).AuthRpc.getSession();
    assert.notEqual(owner.user._id, x.user._id);
    assert.notEqual(owner.subscriptionId, x.subscriptionId);
    assert.equal(owner.user.email, `${sub}@example.com`);
    assert.deepEqual((await t.as(x).AdminUserRpc.findById({ id: x.user._id })).oauthProfiles, [{ provider: 'acme', id: sub, linked: false }]);
  });

  it('an admin sees the links of their own users and can remove them; only signing in with the provider links again', async () => {
    const account = await provenSignup();
    const [first, second] = [uniqueName('first'), uniqueName('second')];
    await signInAs(first, account.email);
    await signInAs(second, account.email);
    const byAccount = t.as(account).AdminUserRpc;
    const linked = await byAccount.findById({ id: account.user._id });
    assert.deepEqual(linked.oauthProfiles, [
      { provider: 'acme', id: first, email: account.email, linked: true },
      { provider: 'acme', id: second, email: account.email, linked: true },
    ]);
    // A record read can be sent back as it is.
    assert.deepEqual((await byAccount.update({ _id: account.user._id, oauthProfiles: linked.oauthProfiles })).oauthProfiles, linked.oauthProfiles);

    // Keeping a link that is not this user's is refused, and changes nothing.
    const stranger = [
      { provider: 'acme', id: first },
      { provider: 'acme', id: uniqueName('stranger'), linked: true },
    ];
    await refusedOn(byAccount.update({ _id: account.user._id, oauthProfiles: stranger }), 'oauthProfiles.1');
    assert.equal((await byAccount.findById({ id: account.user._id })).oauthProfiles.length, 2);

    const kept = await byAccount.update({ _id: account.user._id, oauthProfiles: [{ provider: 'acme', id: first }] });
    assert.deepEqual(kept.oauthProfiles, [{ provider: 'acme', id: first, email: account.email, linked: true }]);
    const self = await t.as(account).AuthRpc.getSession();
    assert.deepEqual(self.user.oauthProfiles, [{ provider: 'acme', id: first }]);

    // The removed provider account is no longer this user's: it signs in elsewhere unless its verified address is this user's.
    const moved = await signInAs(second, `${second}@example.com`);
    assert.notEqual(moved.user._id, account.user._id);
    assert.deepEqual(moved.user.oauthProfiles, [{ provider: 'acme', id: second }]);
    assert.deepEqual((await byAccount.update({ _id: account.user._id, oauthProfiles: [] })).oauthProfiles, []);
  });

  it('a deleted user takes their links along: the provider account then signs its owner up anew', async () => {
    const admin = await t.signup();
    const name = uniqueName('leaver');
    const byAdmin = t.as(admin).AdminUserRpc;
    const member = await byAdmin.create({ email: `${name}@example.com`, username: name, password: 'member password', role: 'user' });
    const sub = uniqueName('leaver');
    const { browser } = await askedAs(sub, member.email);
    assert.equal((await browser.post(`${t.url}/auth/join?decision=join`, {})).status, 302);
    assert.deepEqual((await byAdmin.findById({ id: member._id })).oauthProfiles.length, 1);
    await byAdmin.delete({ _id: member._id });
    const anew = await signInAs(sub, member.email);
    assert.notEqual(anew.user._id, member._id);
    assert.notEqual(anew.subscriptionId, admin.subscriptionId);
    assert.deepEqual(anew.user.oauthProfiles, [{ provider: 'acme', id: sub }]);
  });

  it('refuses an unverified e-mail address, a wrong state and a replayed callback', async () => {
    const sub = uniqueName('unverified');
    idp.accounts.set(sub, { email: `${sub}@example.com`, emailVerified: false });
    const refused = await new TestBrowser().signInAt(`${t.url}/auth/acme`, sub, idp.issuer);
    assert.equal(refused.status, 400);
    assert.match(await refused.text(), /verified e-mail/);

    const forged = await new TestBrowser().get(`${t.url}/auth/acme/callback?code=abc&state=not-ours`);
    assert.equal(forged.status, 400);
    assert.match(await forged.text(), /unknown or has expired/);

    // Capture a real callback URL, use it once, then replay it.
    const ok = uniqueName('replay');
    idp.accounts.set(ok, { email: `${ok}@example.com` });
    const browser = new TestBrowser();
    let response = await browser.get(`${t.url}/auth/acme`);
    let callback: string | undefined;
    for (let hop = 0; hop < 20 && !callback; hop++) {
      const location = response.headers.get('location');
      if (location?.startsWith(`${t.url}/auth/acme/callback`)) callback = location;
      else if (location) response = await browser.get(new URL(location, response.url).toString());
      else {
        const html = await response.text();
        const action = new URL(/<form[^>]*action="([^"]+)"/.exec(html)![1]!, response.url).toString();
        response = html.includes('name="login"')
          ? await browser.post(action, { prompt: 'login', login: ok, password: 'x' })
          : await browser.post(action, { prompt: 'consent' });
      }
    }
    assert.ok(callback);
    assert.equal((await browser.get(callback)).status, 302);
    const replay = await new TestBrowser().get(callback);
    assert.equal(replay.status, 400);
  });

  it('completes an external-browser login that the application collects once by polling', async () => {
    const started = await t.as(null).AuthRpc.createExternalOAuthLoginSession({ provider: 'acme' });
    assert.equal(started.loginUrl, `${t.url}/auth/acme?external=${started.sessionId}`);
    assert.ok(Date.parse(started.expiresAt) > Date.now());
    assert.deepEqual(await poll(started), { status: 'pending' });
    await refused(poll({ ...started, pollToken: 'guess' }), 'NOT_FOUND');

    const sub = uniqueName('desktop');
    idp.accounts.set(sub, { email: `${sub}@example.com` });
    const browser = new TestBrowser();
    const page = await browser.signInAt(started.loginUrl, sub, idp.issuer);
    assert.equal(page.status, 200);
    assert.match(await page.text(), /You can close this window/);
    assert.equal(browser.cookie(host(), 'session'), undefined, 'the browser gets no session of its own');

    const completed = await completedLogin(started);
    assert.equal(completed.user.email, `${sub}@example.com`);
    assert.equal((await t.as(completed).AuthRpc.getSession()).user._id, completed.user._id);
    assert.deepEqual(await poll(started), { status: 'expired' });

    // The link cannot start a second login once used.
    const reuse = await new TestBrowser().get(started.loginUrl);
    assert.equal(reuse.status, 400);
  });

  it('a user with a second factor is signed in by the provider only once they give it: the browser goes on at the console, an external login is handed over', async () => {
    const sub = uniqueName('twofactor');
    idp.accounts.set(sub, { email: `${sub}@example.com` });
    const first = new TestBrowser();
    await first.signInAt(`${t.url}/auth/acme`, sub, idp.issuer);
    const session = { token: first.cookie(host(), 'session')! };
    const enrolment = await t.as(session).AccountSecurityRpc.beginTotpEnrolment({});
    const { recoveryCodes } = await t
      .as(session)
      .AccountSecurityRpc.confirmTotpEnrolment({ enrolmentId: enrolment.enrolmentId, code: totpCode(enrolment.secret) });
    const ticketOf = (answer: Response) => {
      assert.equal(answer.status, 302);
      const location = answer.headers.get('location') ?? '';
      assert.match(location, /\/console#\/sign-in\/sit_[\w-]+$/);
      return location.slice(location.lastIndexOf('/') + 1);
    };

    const browser = new TestBrowser();
    const ticket = ticketOf(await browser.signInAt(`${t.url}/auth/acme`, sub, idp.issuer));
    assert.equal(browser.cookie(host(), 'session'), undefined, 'no session before the second factor');
    const done = await t.as(null).AccountSecurityRpc.verifySecondFactor({ ticket, code: totpCode(enrolment.secret, 1) });
    if (done.status !== 'signed-in') assert.fail(JSON.stringify(done));
    assert.deepEqual((await t.as({ token: done.token }).AccountSecurityRpc.getSecurity()).session?.amr, ['oauth', 'otp']);

    const started = await t.as(null).AuthRpc.createExternalOAuthLoginSession({ provider: 'acme' });
    const external = ticketOf(await new TestBrowser().signInAt(started.loginUrl, sub, idp.issuer));
    assert.deepEqual(await poll(started), { status: 'pending' });
    assert.deepEqual(await t.as(null).AccountSecurityRpc.verifySecondFactor({ ticket: external, code: recoveryCodes![0]! }), { status: 'handed-over' });
    assert.equal((await completedLogin(started)).user.email, `${sub}@example.com`);
  });

  it('an expired external session reads as expired and its link no longer works', async () => {
    const started = await t.as(null).AuthRpc.createExternalOAuthLoginSession({ provider: 'acme' });
    await t.app.deps.db.execute(`update auth_external_login set expires_at = now() - interval '1 second' where id = ?`, [started.sessionId]);
    assert.deepEqual(await poll(started), { status: 'expired' });
    const link = await new TestBrowser().get(started.loginUrl);
    assert.equal(link.status, 400);
    const mangled = await new TestBrowser().get(`${t.url}/auth/acme?external=not-a-session`);
    assert.equal(mangled.status, 400);
  });
});
