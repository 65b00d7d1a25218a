import assert from 'node:assert/strict';
import { setTimeout as sleep } from 'node:timers/promises';
import { after, before, describe, it } from 'node:test';
import WebSocket from 'ws';
import { startTestApp, uniqueName, type TestApp } from '../../../test/support/harness.ts';

describe('AuthRpc: signup, login, sessions', () => {
  let t: TestApp;
  before(async () => {
    t = await startTestApp();
  });
  after(() => t.close());

  it('signup creates a subscription with its first user as admin and starts a session', async () => {
    const name = uniqueName('Ann');
    const response = await t.call('AuthRpc.signup', {
      email: `  ${name.toUpperCase()}@Example.COM `,
      username: name,
      password: 'correct horse',
      firstName: 'Ann',
      lastName: 'Lee',
    });
    assert.equal(response.status, 200);
    const { token, expiresAt, user, subscriptionId } = response.body.data;
    assert.equal(user.email, `${name.toLowerCase()}@example.com`);
    assert.equal(user.username, name);
    assert.equal(user.role, 'admin');
    assert.equal(user.firstName, 'Ann');
    assert.equal(user.lastName, 'Lee');
    assert.equal(user.isActive, true);
    assert.equal(user.subscriptionId, subscriptionId);
    assert.equal('password' in user || 'passwordHash' in user, false);
    assert.ok(Date.parse(expiresAt) > Date.now() + 29 * 86400_000);
    const cookie = response.headers.get('set-cookie')!;
    assert.match(cookie, new RegExp(`^session=${token};`));
    assert.match(cookie, /HttpOnly/);
    assert.match(cookie, /SameSite=Lax/);
    const session = await t.ok('AuthRpc.getSession', {}, { token });
    assert.equal(session.user._id, user._id);
    assert.equal(session.subscriptionId, subscriptionId);
    assert.equal(session.apiKeyId, null);
  });

  it('signup validates every field and creates nothing on failure', async () => {
    for (const [params, field] of [
      [{ email: 'not-an-email', username: 'valid_name' }, 'email'],
      [{ username: 'valid_name' }, 'email'],
      [{ email: 'a@example.com' }, 'username'],
      [{ email: 'a@example.com', username: 'x' }, 'username'],
      [{ email: 'a@example.com', username: 'has space' }, 'username'],
      [{ email: 'a@example.com', username: 'valid_name', password: 'short' }, 'password'],
    ] as const) {
      const response = await t.call('AuthRpc.signup', params);
      assert.equal(response.status, 400, JSON.stringify(params));
      assert.equal(response.body.data.code, 'VALIDATION_ERROR');
      assert.ok(
        response.body.data.issues.some((issue: any) => issue.path === field),
        JSON.stringify(response.body.data),
      );
    }
    const [count] = await t.app.deps.db.execute<{ n: number }>(`select count(*)::int as n from auth_user where email = 'a@example.com'`);
    assert.equal(count!.n, 0);
  });

  it('signup refuses a taken e-mail or username, whatever the case', async () => {
    const first = await t.signup();
    const byEmail = await t.call('AuthRpc.signup', { email: first.user.email.toUpperCase(), username: uniqueName() });
    assert.equal(byEmail.status, 409);
    assert.match(byEmail.body.data.error, /e-mail/);
    const byName = await t.call('AuthRpc.signup', { email: `${uniqueName()}@example.com`, username: first.user.username.toUpperCase() });
    assert.equal(byName.status, 409);
    assert.match(byName.body.data.error, /username/);
  });

  it('logs in by e-mail or username, case-insensitively, and refuses a wrong password', async () => {
    const account = await t.signup();
    for (const identifier of [account.user.email, account.user.username, account.user.email.toUpperCase()]) {
      const session = await t.ok('AuthRpc.login', { identifier, password: account.password });
      assert.equal(session.user._id, account.user._id);
      assert.ok(session.token.length >= 43);
      assert.notEqual(session.token, account.token);
    }
    const wrong = await t.call('AuthRpc.login', { identifier: account.user.username, password: 'not the password' });
    assert.equal(wrong.status, 401);
    assert.equal(wrong.body.data.error, 'Invalid identifier or password');
    const unknown = await t.call('AuthRpc.login', { identifier: 'nobody-here', password: 'not the password' });
    assert.equal(unknown.body.data.error, 'Invalid identifier or password');
  });

  it('a user who signed up without a password cannot log in with one', async () => {
    const name = uniqueName();
    await t.ok('AuthRpc.signup', { email: `${name}@example.com`, username: name });
    const response = await t.call('AuthRpc.login', { identifier: name, password: 'anything at all' });
    assert.equal(response.status, 401);
  });

  it('accepts the session as a Bearer token and as the session cookie', async () => {
    const account = await t.signup();
    const viaCookie = await t.call('AuthRpc.getSession', {}, { headers: { cookie: `theme=dark; session=${account.token}` } });
    assert.equal(viaCookie.status, 200);
    assert.equal(viaCookie.body.data.user._id, account.user._id);
  });

  it('logout revokes the session at once and clears the cookie', async () => {
    const account = await t.signup();
    await t.ok('AuthRpc.getSession', {}, { token: account.token });
    const response = await t.call('AuthRpc.logout', {}, { token: account.token });
    assert.deepEqual(response.body, { success: true, data: { success: true } });
    assert.match(response.headers.get('set-cookie')!, /^session=; .*Max-Age=0/);
    const after = await t.call('AuthRpc.getSession', {}, { token: account.token });
    assert.equal(after.status, 401);
    assert.equal(after.body.data.code, 'UNAUTHENTICATED');
  });

  it('logout with an API key is refused', async () => {
    const account = await t.signup();
    const key = await t.ok('ApiKeyRpc.create', { description: 'k' }, { token: account.token });
    const response = await t.call('AuthRpc.logout', {}, { apiKey: key.fullKey });
    assert.equal(response.status, 400);
    assert.equal(response.body.data.code, 'BAD_REQUEST');
    const session = await t.ok('AuthRpc.getSession', {}, { apiKey: key.fullKey });
    assert.equal(session.apiKeyId, key._id);
    assert.equal(session.expiresAt, null);
  });

  it('stores session tokens only as hashes', async () => {
    const account = await t.signup();
    const rows = await t.app.deps.db.execute<Record<string, unknown>>('select * from auth_session where user_id = ?', [account.user._id]);
    assert.equal(rows.length, 1);
    assert.ok(!JSON.stringify(rows).includes(account.token));
    assert.match(String(rows[0]!.token_hash), /^[0-9a-f]{64}$/);
  });

  it('getClientConfig is public and tells the signup settings', async () => {
    const config = await t.ok('AuthRpc.getClientConfig');
    assert.deepEqual(config, {
      signupMode: 'open',
      requiredVerifications: { email: false, phone: false },
      oauthProviders: [],
      passwordMinLength: 8,
    });
  });
});

describe('session expiry', () => {
  // Long enough that a use a loaded machine answers late still falls within it (the sliding test's uses come 1 s apart).
  const TTL_SECONDS = 4;
  let t: TestApp;
  before(async () => {
    t = await startTestApp({ env: { SESSION_TTL_SECONDS: String(TTL_SECONDS), WS_HEARTBEAT_SECONDS: '1' } });
  });
  after(() => t.close());

  it('a session expires after the TTL without use', async () => {
    const account = await t.signup();
    await t.ok('AuthRpc.getSession', {}, { token: account.token });
    await sleep(TTL_SECONDS * 1000 + 300);
    const response = await t.call('AuthRpc.getSession', {}, { token: account.token });
    assert.equal(response.status, 401);
    assert.match(response.body.data.error, /expired/);
  });

  it('a WebSocket opened with the session closes once the session expires', async () => {
    const account = await t.signup();
    const ws = new WebSocket(`${t.url.replace('http', 'ws')}/ws`, { headers: { authorization: `Bearer ${account.token}` } });
    try {
      const closed = new Promise<number>((resolve) => ws.once('close', (code) => resolve(code)));
      const ready = await new Promise<any>((resolve, reject) => {
        ws.once('message', (data) => resolve(JSON.parse(data.toString())));
        ws.once('error', reject);
      });
      assert.equal(ready.type, 'ready');
      const code = await Promise.race([closed, sleep(TTL_SECONDS * 1000 + 15_000, 'still open', { ref: false })]);
      assert.equal(code, 4001);
    } finally {
      ws.terminate();
    }
  });

  it('use slides the expiry forward', async () => {
    const account = await t.signup();
    const first = await t.ok('AuthRpc.getSession', {}, { token: account.token });
    for (let step = 0; step <= TTL_SECONDS; step++) {
      await sleep(1000);
      await t.ok('AuthRpc.getSession', {}, { token: account.token });
    }
    // Over TTL_SECONDS after login: alive only because it was used.
    const last = await t.ok('AuthRpc.getSession', {}, { token: account.token });
    assert.ok(Date.parse(last.expiresAt) > Date.parse(first.expiresAt));
  });
});
