import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { startTestApp, uniqueName, type TestApp } from '../support/harness.ts';
import { startOpenIdProvider, TestBrowser } from '../support/oidc.ts';

describe('OAuth login with an OpenID provider', () => {
  let t: TestApp;
  let idp: Awaited<ReturnType<typeof startOpenIdProvider>>;

  before(async () => {
    idp = await startOpenIdProvider();
    t = await startTestApp({
      env: {
        OAUTH_PROVIDERS: 'acme',
        OAUTH_ACME_ISSUER: idp.issuer,
        OAUTH_ACME_CLIENT_ID: 'rpc-service',
        OAUTH_ACME_CLIENT_SECRET: 'test-client-secret',
        OAUTH_ALLOW_HTTP: 'true',
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

  it('lists the provider and its login path', async () => {
    assert.deepEqual((await t.ok('AuthRpc.getClientConfig')).oauthProviders, ['acme']);
    assert.deepEqual(await t.ok('AuthRpc.getOAuthLoginUrl', { provider: 'acme' }), { url: '/auth/acme' });
    const unknown = await t.call('AuthRpc.getOAuthLoginUrl', { provider: 'nope' });
    assert.equal(unknown.status, 404);
  });

  it('answers FEATURE_UNAVAILABLE with the settings to set for a preset that is not configured, NOT_FOUND for an unknown name', async () => {
    for (const preset of ['google', 'gitlab', 'apple']) {
      const settings = ['OAUTH_PROVIDERS', `OAUTH_${preset.toUpperCase()}_CLIENT_ID`, `OAUTH_${preset.toUpperCase()}_CLIENT_SECRET`];
      for (const method of ['AuthRpc.getOAuthLoginUrl', 'AuthRpc.createExternalOAuthLoginSession']) {
        const refused = await t.call(method, { provider: preset });
        assert.equal(refused.status, 503, `${method} ${preset}`);
        assert.equal(refused.body.data.code, 'FEATURE_UNAVAILABLE');
        for (const name of settings) assert.ok(refused.body.data.error.includes(name), `${method} ${preset}: ${refused.body.data.error} names ${name}`);
      }
      // The browser routes answer the same way, on a page.
      for (const route of [`/auth/${preset}`, `/auth/${preset}/callback?code=abc&state=xyz`]) {
        const page = await fetch(`${t.url}${route}`, { redirect: 'manual' });
        assert.equal(page.status, 503, route);
        assert.ok((await page.text()).includes(`OAUTH_${preset.toUpperCase()}_CLIENT_ID`), route);
      }
    }
    // Case does not matter, as for configured providers.
    assert.equal((await t.call('AuthRpc.getOAuthLoginUrl', { provider: 'Google' })).body.data.code, 'FEATURE_UNAVAILABLE');

    for (const unknown of ['nope', 'constructor']) {
      const refused = await t.call('AuthRpc.getOAuthLoginUrl', { provider: unknown });
      assert.equal(refused.status, 404);
      assert.equal(refused.body.data.code, 'NOT_FOUND');
      assert.equal((await t.call('AuthRpc.createExternalOAuthLoginSession', { provider: unknown })).body.data.code, 'NOT_FOUND');
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
    const session = await t.ok('AuthRpc.getSession', {}, { token });
    assert.equal(session.user.email, `${sub}@example.com`);
    assert.equal(session.user.isVerified, true);
    assert.equal(session.user.role, 'admin');
    assert.equal(session.user.firstName, 'Ida');
    assert.deepEqual(session.user.oauthProfiles, [{ provider: 'acme', id: sub }]);

    // The same person again: the same account, found by the provider profile.
    const again = new TestBrowser();
    await again.signInAt(`${t.url}/auth/acme`, sub, idp.issuer);
    assert.equal((await t.ok('AuthRpc.getSession', {}, { token: again.cookie(host(), 'session') })).user._id, session.user._id);
  });

  it('gives a new user a free username, never a reserved one', async () => {
    const sub = uniqueName('reserved');
    idp.accounts.set(sub, { email: `admin@${sub.toLowerCase()}.example.com` });
    const browser = new TestBrowser();
    await browser.signInAt(`${t.url}/auth/acme`, sub, idp.issuer);
    const session = await t.ok('AuthRpc.getSession', {}, { token: browser.cookie(host(), 'session') });
    assert.match(session.user.username, /^admin-[A-Za-z0-9]{4}$/);
  });

  it('links an existing account by its verified e-mail address', async () => {
    const account = await t.signup();
    const sub = uniqueName('linked');
    idp.accounts.set(sub, { email: account.user.email.toUpperCase() });
    const browser = new TestBrowser();
    await browser.signInAt(`${t.url}/auth/acme`, sub, idp.issuer);
    const session = await t.ok('AuthRpc.getSession', {}, { token: browser.cookie(host(), 'session') });
    assert.equal(session.user._id, account.user._id);
    assert.deepEqual(session.user.oauthProfiles, [{ provider: 'acme', id: sub }]);
  });

  /** Signs in at the provider as `sub` in a new browser and answers the session the app gave it. */
  const signInAs = async (sub: string, email = `${sub}@example.com`) => {
    idp.accounts.set(sub, { email });
    const browser = new TestBrowser();
    await browser.signInAt(`${t.url}/auth/acme`, sub, idp.issuer);
    return t.ok<any>('AuthRpc.getSession', {}, { token: browser.cookie(host(), 'session') });
  };
  const refusedOn = (response: { status: number; body: any }, path: string) => {
    assert.equal(response.status, 400, JSON.stringify(response.body));
    assert.equal(response.body.data.code, 'VALIDATION_ERROR');
    const issue = response.body.data.issues.find((found: { path: string }) => found.path === path);
    assert.ok(issue, `an issue on ${path}: ${JSON.stringify(response.body.data.issues)}`);
    return issue.message as string;
  };

  it("an admin cannot put another tenant's provider account on a user of their own; its owner still signs into their own account", async () => {
    const sub = uniqueName('person');
    const person = await signInAs(sub);
    const x = await t.signup();
    const claim = [{ provider: 'acme', id: sub }];
    const decoy = uniqueName('decoy');
    const created = await t.call(
      'AdminUserRpc.create',
      { email: `${decoy}@example.com`, username: decoy, password: 'decoy password', role: 'user', oauthProfiles: claim },
      { token: x.token },
    );
    const onCreate = refusedOn(created, 'oauthProfiles.0');
    assert.equal((await t.call('AdminUserRpc.getData', { filter: { username: decoy } }, { token: x.token })).body.data.totalDocs, 0, 'nothing was created');
    const onUpdate = refusedOn(
      await t.call('AdminUserRpc.update', { _id: x.user._id, firstName: 'Mallory', oauthProfiles: claim }, { token: x.token }),
      'oauthProfiles.0',
    );
    const unchanged = await t.ok<any>('AdminUserRpc.findById', { id: x.user._id }, { token: x.token });
    assert.deepEqual([unchanged.oauthProfiles, unchanged.firstName], [[], null], 'nothing was changed');

    // The answer is the same for a provider account nobody has: it tells tenant X nothing about other tenants.
    const nobody = [{ provider: 'acme', id: uniqueName('nobody') }];
    assert.equal(refusedOn(await t.call('AdminUserRpc.update', { _id: x.user._id, oauthProfiles: nobody }, { token: x.token }), 'oauthProfiles.0'), onUpdate);
    assert.equal(onCreate, onUpdate);

    const again = await signInAs(sub);
    assert.equal(again.user._id, person.user._id);
    assert.equal(again.subscriptionId, person.subscriptionId);

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

  it('a provider account an admin named before its owner ever signed in signs its owner into an account of their own (external-browser flow)', async () => {
    const sub = uniqueName('newcomer');
    const x = await t.signup();
    await t.call('AdminUserRpc.update', { _id: x.user._id, oauthProfiles: [{ provider: 'acme', id: sub }] }, { token: x.token });
    idp.accounts.set(sub, { email: `${sub}@example.com` });
    const started = await t.ok<any>('AuthRpc.createExternalOAuthLoginSession', { provider: 'acme' });
    await new TestBrowser().signInAt(started.loginUrl, sub, idp.issuer);
    const completed = await t.ok<any>('AuthRpc.pollExternalOAuthLoginSession', { sessionId: started.sessionId, pollToken: started.pollToken });
    const owner = await t.ok<any>('AuthRpc.getSession', {}, { token: completed.token });
    assert.notEqual(owner.user._id, x.user._id);
    assert.notEqual(owner.subscriptionId, x.subscriptionId);
    assert.equal(owner.user.email, `${sub}@example.com`);
    assert.deepEqual((await t.ok<any>('AdminUserRpc.findById', { id: x.user._id }, { token: x.token })).oauthProfiles, []);
  });

  it('an admin sees the links of their own users and can remove them; only signing in with the provider links again', async () => {
    const account = await t.signup();
    const [first, second] = [uniqueName('first'), uniqueName('second')];
    await signInAs(first, account.user.email);
    await signInAs(second, account.user.email);
    const linked = await t.ok<any>('AdminUserRpc.findById', { id: account.user._id }, { token: account.token });
    assert.deepEqual(linked.oauthProfiles, [
      { provider: 'acme', id: first, email: account.user.email },
      { provider: 'acme', id: second, email: account.user.email },
    ]);

    // Keeping a link that is not this user's is refused, and changes nothing.
    const stranger = [
      { provider: 'acme', id: first },
      { provider: 'acme', id: uniqueName('stranger') },
    ];
    refusedOn(await t.call('AdminUserRpc.update', { _id: account.user._id, oauthProfiles: stranger }, { token: account.token }), 'oauthProfiles.1');
    assert.equal((await t.ok<any>('AdminUserRpc.findById', { id: account.user._id }, { token: account.token })).oauthProfiles.length, 2);

    const kept = await t.ok<any>('AdminUserRpc.update', { _id: account.user._id, oauthProfiles: [{ provider: 'acme', id: first }] }, { token: account.token });
    assert.deepEqual(kept.oauthProfiles, [{ provider: 'acme', id: first, email: account.user.email }]);
    const self = await t.ok<any>('AuthRpc.getSession', {}, { token: account.token });
    assert.deepEqual(self.user.oauthProfiles, [{ provider: 'acme', id: first }]);

    // The removed provider account is no longer this user's: it signs in elsewhere unless its verified address is this user's.
    const moved = await signInAs(second, `${second}@example.com`);
    assert.notEqual(moved.user._id, account.user._id);
    assert.deepEqual(moved.user.oauthProfiles, [{ provider: 'acme', id: second }]);
    assert.deepEqual((await t.ok<any>('AdminUserRpc.update', { _id: account.user._id, oauthProfiles: [] }, { token: account.token })).oauthProfiles, []);
  });

  it('a deleted user takes their links along: the provider account then signs its owner up anew', async () => {
    const admin = await t.signup();
    const name = uniqueName('leaver');
    const member = await t.ok<any>(
      'AdminUserRpc.create',
      { email: `${name}@example.com`, username: name, password: 'member password', role: 'user' },
      { token: admin.token },
    );
    const sub = uniqueName('leaver');
    assert.equal((await signInAs(sub, member.email)).user._id, member._id);
    await t.ok('AdminUserRpc.delete', { _id: member._id }, { token: admin.token });
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
    const started = await t.ok('AuthRpc.createExternalOAuthLoginSession', { provider: 'acme' });
    assert.equal(started.loginUrl, `${t.url}/auth/acme?external=${started.sessionId}`);
    assert.ok(Date.parse(started.expiresAt) > Date.now());
    const pending = await t.ok('AuthRpc.pollExternalOAuthLoginSession', { sessionId: started.sessionId, pollToken: started.pollToken });
    assert.deepEqual(pending, { status: 'pending' });
    const wrongToken = await t.call('AuthRpc.pollExternalOAuthLoginSession', { sessionId: started.sessionId, pollToken: 'guess' });
    assert.equal(wrongToken.status, 404);

    const sub = uniqueName('desktop');
    idp.accounts.set(sub, { email: `${sub}@example.com` });
    const browser = new TestBrowser();
    const page = await browser.signInAt(started.loginUrl, sub, idp.issuer);
    assert.equal(page.status, 200);
    assert.match(await page.text(), /You can close this window/);
    assert.equal(browser.cookie(host(), 'session'), undefined, 'the browser gets no session of its own');

    const completed = await t.ok('AuthRpc.pollExternalOAuthLoginSession', { sessionId: started.sessionId, pollToken: started.pollToken });
    assert.equal(completed.status, 'completed');
    assert.equal(completed.user.email, `${sub}@example.com`);
    assert.equal((await t.ok('AuthRpc.getSession', {}, { token: completed.token })).user._id, completed.user._id);
    const second = await t.ok('AuthRpc.pollExternalOAuthLoginSession', { sessionId: started.sessionId, pollToken: started.pollToken });
    assert.deepEqual(second, { status: 'expired' });

    // The link cannot start a second login once used.
    const reuse = await new TestBrowser().get(started.loginUrl);
    assert.equal(reuse.status, 400);
  });

  it('an expired external session reads as expired and its link no longer works', async () => {
    const started = await t.ok('AuthRpc.createExternalOAuthLoginSession', { provider: 'acme' });
    await t.app.deps.db.execute(`update auth_external_login set expires_at = now() - interval '1 second' where id = ?`, [started.sessionId]);
    assert.deepEqual(await t.ok('AuthRpc.pollExternalOAuthLoginSession', { sessionId: started.sessionId, pollToken: started.pollToken }), {
      status: 'expired',
    });
    const link = await new TestBrowser().get(started.loginUrl);
    assert.equal(link.status, 400);
    const mangled = await new TestBrowser().get(`${t.url}/auth/acme?external=not-a-session`);
    assert.equal(mangled.status, 400);
  });
});
