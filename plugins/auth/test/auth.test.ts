import assert from 'node:assert/strict';
import { setTimeout as sleep } from 'node:timers/promises';
import { after, before, describe, it } from 'node:test';
import WebSocket from 'ws';
import type { AuthRpcGetSessionResult, AuthRpcLogoutResult, AuthRpcSignupResult } from '../../../test/support/caller.ts';
import { refused } from '../../../test/support/caller.ts';
import { startTestApp, uniqueName, type TestApp } from '../../../test/support/harness.ts';

describe('AuthRpc: signup, login, sessions', () => {
  let t: TestApp;
  before(async () => {
    t = await startTestApp();
  });
  after(() => t.close());

  it('signup creates a subscription with its first user as admin and starts a session', async () => {
    const name = uniqueName('Ann');
    // Over HTTP: the session cookie is part of what is checked.
    const response = await t.call<AuthRpcSignupResult>('AuthRpc.signup', {
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
    const session = await t.as({ token }).AuthRpc.getSession();
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
      const error = await refused(t.as(null).call('AuthRpc.signup', params), 'VALIDATION_ERROR', JSON.stringify(params));
      assert.ok(
        error.issues?.some((issue) => issue.path === field),
        JSON.stringify(error),
      );
    }
    const [count] = await t.app.deps.db.execute<{ n: number }>(`select count(*)::int as n from auth_user where email = 'a@example.com'`);
    assert.equal(count!.n, 0);
  });

  it('signup refuses a taken e-mail or username, whatever the case', async () => {
    const first = await t.signup();
    const byEmail = await refused(t.as(null).AuthRpc.signup({ email: first.user.email.toUpperCase(), username: uniqueName() }), 'CONFLICT');
    assert.match(byEmail.message, /e-mail/);
    const byName = await refused(t.as(null).AuthRpc.signup({ email: `${uniqueName()}@example.com`, username: first.user.username.toUpperCase() }), 'CONFLICT');
    assert.match(byName.message, /username/);
  });

  it('logs in by e-mail or username, case-insensitively, and refuses a wrong password', async () => {
    const account = await t.signup();
    for (const identifier of [account.user.email, account.user.username, account.user.email.toUpperCase()]) {
      const session = await t.as(null).AuthRpc.login({ identifier, password: account.password });
      assert.equal(session.user._id, account.user._id);
      assert.ok(session.token.length >= 43);
      assert.notEqual(session.token, account.token);
    }
    const wrong = await refused(t.as(null).AuthRpc.login({ identifier: account.user.username, password: 'not the password' }), 'UNAUTHENTICATED');
    assert.equal(wrong.message, 'Invalid identifier or password');
    const unknown = await refused(t.as(null).AuthRpc.login({ identifier: 'nobody-here', password: 'not the password' }), 'UNAUTHENTICATED');
    assert.equal(unknown.message, 'Invalid identifier or password');
  });

  it('a user who signed up without a password cannot log in with one', async () => {
    const name = uniqueName();
    await t.as(null).AuthRpc.signup({ email: `${name}@example.com`, username: name });
    await refused(t.as(null).AuthRpc.login({ identifier: name, password: 'anything at all' }), 'UNAUTHENTICATED');
  });

  it('accepts the session as a Bearer token and as the session cookie', async () => {
    const account = await t.signup();
    const viaCookie = await t.call<AuthRpcGetSessionResult>('AuthRpc.getSession', {}, { headers: { cookie: `theme=dark; session=${account.token}` } });
    assert.equal(viaCookie.status, 200);
    assert.equal(viaCookie.body.data.user._id, account.user._id);
  });

  it('logout revokes the session at once and clears the cookie', async () => {
    const account = await t.signup();
    await t.as(account).AuthRpc.getSession();
    // Over HTTP: the cleared cookie is part of what is checked.
    const response = await t.call<AuthRpcLogoutResult>('AuthRpc.logout', {}, { token: account.token });
    assert.deepEqual(response.body, { success: true, data: { success: true } });
    assert.match(response.headers.get('set-cookie')!, /^session=; .*Max-Age=0/);
    await refused(t.as(account).AuthRpc.getSession(), 'UNAUTHENTICATED');
  });

  it('logout with an API key is refused', async () => {
    const account = await t.signup();
    const key = await t.as(account).ApiKeyRpc.create({ description: 'k' });
    await refused(t.as({ apiKey: key.fullKey }).AuthRpc.logout(), 'BAD_REQUEST');
    const session = await t.as({ apiKey: key.fullKey }).AuthRpc.getSession();
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
    const config = await t.as(null).AuthRpc.getClientConfig();
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
    await t.as(account).AuthRpc.getSession();
    await sleep(TTL_SECONDS * 1000 + 300);
    const error = await refused(t.as(account).AuthRpc.getSession(), 'UNAUTHENTICATED');
    assert.match(error.message, /expired/);
  });

  it('a WebSocket opened with the session closes once the session expires', async () => {
    const account = await t.signup();
    const ws = new WebSocket(`${t.url.replace('http', 'ws')}/ws`, { headers: { authorization: `Bearer ${account.token}` } });
    try {
      const closed = new Promise<number>((resolve) => ws.once('close', (code) => resolve(code)));
      const ready = await new Promise<{ type: string }>((resolve, reject) => {
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
    const first = await t.as(account).AuthRpc.getSession();
    for (let step = 0; step <= TTL_SECONDS; step++) {
      await sleep(1000);
      await t.as(account).AuthRpc.getSession();
    }
    // Over TTL_SECONDS after login: alive only because it was used.
    const last = await t.as(account).AuthRpc.getSession();
    assert.ok(Date.parse(last.expiresAt!) > Date.parse(first.expiresAt!));
  });
});
