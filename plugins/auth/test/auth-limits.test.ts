import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import type { AuthRpcSignupResult } from '../../../test/support/caller.ts';
import { startTestApp, uniqueName, type RpcResponse, type TestApp } from '../../../test/support/harness.ts';

const PASSWORD = 'correct horse battery';

/** A RATE_LIMITED answer with a Retry-After within the window. */
function assertLimited(response: RpcResponse, windowSeconds: number, what: string): void {
  assert.equal(response.status, 429, what);
  assert.equal(response.body.data.code, 'RATE_LIMITED', what);
  const retryAfter = Number(response.headers.get('retry-after'));
  assert.ok(retryAfter > 0 && retryAfter <= windowSeconds, `${what}: Retry-After ${retryAfter}`);
}

let nextAddress = 0;
/** A client address of its own for each caller (TRUST_PROXY is on). */
const newAddress = () => `198.51.100.${++nextAddress}`;
const from = (ip: string) => ({ headers: { 'x-forwarded-for': ip } });

// Over HTTP: each client's address is the one X-Forwarded-For names (TRUST_PROXY is on), and a refusal's Retry-After is a header.
describe('login and signup limits: one client cannot lock out another', () => {
  let t: TestApp;
  before(async () => {
    t = await startTestApp({
      withNotes: false,
      plugins: ['auth', 'admin-user'],
      // LOGIN_FAILURE_LIMIT keeps its default of 10.
      env: { TRUST_PROXY: 'true', LOGIN_IP_FAILURE_LIMIT: '12', LOGIN_ACCOUNT_FAILURE_LIMIT: '15', SIGNUP_IP_LIMIT: '3', SIGNUP_CHECK_IP_LIMIT: '6' },
    });
  });
  after(() => t.close());

  const signupFrom = async (ip = newAddress(), extra: Record<string, string> = {}) => {
    const name = uniqueName('user');
    const data = await t.ok<AuthRpcSignupResult>('AuthRpc.signup', { email: `${name}@example.com`, username: name, password: PASSWORD, ...extra }, from(ip));
    return { name, token: data.token, subscriptionId: data.subscriptionId };
  };
  const login = (identifier: string, password: string, ip: string) => t.call('AuthRpc.login', { identifier, password }, from(ip));

  it("locks one account after 10 wrong passwords from an address, and no one else's correct password", async () => {
    const office = newAddress();
    const ann = await signupFrom(office);
    const bob = await signupFrom(office);
    const carol = await signupFrom(); // has never logged in from the office
    for (let attempt = 1; attempt <= 10; attempt++) {
      assert.equal((await login(ann.name, `wrong ${attempt}`, office)).status, 401, `attempt ${attempt}`);
    }
    assertLimited(await login(ann.name, PASSWORD, office), 900, 'ann, right password');
    assertLimited(await login(`${ann.name}@example.com`, PASSWORD, office), 900, 'ann by e-mail address');

    assert.equal((await login(bob.name, PASSWORD, office)).status, 200, 'bob from the same address');
    assert.equal((await login(carol.name, PASSWORD, office)).status, 200, 'carol from the same address');
    assert.equal((await login(ann.name, PASSWORD, newAddress())).status, 200, 'ann from elsewhere');
  });

  it('stops one address spraying wrong passwords across accounts, without an oracle, sparing accounts known there and those it never tried', async () => {
    const sprayer = newAddress();
    const regular = await signupFrom(sprayer); // logs in from that address every day
    const victims = [await signupFrom(), await signupFrom()];
    const bystander = await signupFrom(); // never logged in from the sprayer's address, nor tried from it
    const targets = [...victims.map((victim) => victim.name), ...Array.from({ length: 10 }, () => uniqueName('nobody'))];
    for (const name of targets) assert.equal((await login(name, 'Summer2024!', sprayer)).status, 401, name);

    // Past the address's limit a right password on an account it tried is refused like a wrong one, so guesses learn nothing.
    assertLimited(await login(victims[0]!.name, PASSWORD, sprayer), 900, 'a victim, right password');
    assertLimited(await login(victims[1]!.name, 'Winter2024!', sprayer), 900, 'a victim, wrong password');
    // An account it never tried gets one try from there, not more.
    const another = uniqueName('nobody');
    assert.equal((await login(another, 'Winter2024!', sprayer)).status, 401, 'an unknown name, first try');
    assertLimited(await login(another, 'Autumn2024!', sprayer), 900, 'an unknown name, second try');

    assert.equal((await login(regular.name, PASSWORD, sprayer)).status, 200, 'an account that logged in from there before');
    assert.equal((await login(bystander.name, PASSWORD, sprayer)).status, 200, 'an account it never tried');
    assert.equal((await login(victims[0]!.name, PASSWORD, newAddress())).status, 200, 'the victim from elsewhere');
  });

  it('counts signup checks per address: preSignupValidate and signups refused as taken are no unlimited oracle of who has an account', async () => {
    const prober = newAddress();
    const taken = await signupFrom();
    const checks = [`${taken.name}@example.com`, `${uniqueName('free')}@example.com`];
    // Six checks from one address in the window (SIGNUP_CHECK_IP_LIMIT) answer as usual, a signup refused as taken among them.
    for (let round = 0; round < 5; round++) {
      const email = checks[round % 2]!;
      const response = await t.call('AuthRpc.preSignupValidate', { email, username: uniqueName('probe') }, from(prober));
      assert.equal(response.status, email === checks[0] ? 409 : 200, `check ${round + 1}`);
    }
    const refused = await t.call('AuthRpc.signup', { email: checks[0], username: uniqueName('probe'), password: PASSWORD }, from(prober));
    assert.equal(refused.status, 409, 'a signup refused as taken');
    // Then every check answers RATE_LIMITED, whether or not the address is taken.
    assertLimited(await t.call('AuthRpc.preSignupValidate', { email: checks[0], username: uniqueName('probe') }, from(prober)), 3600, 'taken');
    assertLimited(await t.call('AuthRpc.preSignupValidate', { email: checks[1], username: uniqueName('probe') }, from(prober)), 3600, 'free');
    assertLimited(await t.call('AuthRpc.signup', { email: checks[0], username: uniqueName('probe'), password: PASSWORD }, from(prober)), 3600, 'signup');
    // Another address is not held back.
    assert.equal((await t.call('AuthRpc.preSignupValidate', { email: checks[1], username: uniqueName('probe') }, from(newAddress()))).status, 200);
  });

  it('stops wrong passwords on one account from many addresses, while its owner logs in from home', async () => {
    const home = newAddress();
    const eve = await signupFrom(home);
    for (let attempt = 1; attempt <= 15; attempt++) {
      assert.equal((await login(eve.name, `guess ${attempt}`, newAddress())).status, 401, `attempt ${attempt}`);
    }
    assertLimited(await login(eve.name, PASSWORD, newAddress()), 900, 'eve, right password, from a new address');
    assert.equal((await login(eve.name, PASSWORD, home)).status, 200, 'eve from home');
  });

  it('limits signups per address (with Retry-After) and counts none that uses an invite code', async () => {
    const address = newAddress();
    const first = await signupFrom(address);
    await signupFrom(address);
    await signupFrom(address);
    const name = uniqueName('fourth');
    const refused = await t.call('AuthRpc.signup', { email: `${name}@example.com`, username: name, password: PASSWORD }, from(address));
    assertLimited(refused, 3600, 'fourth signup');
    assert.equal((await login(name, PASSWORD, newAddress())).status, 401, 'no account was made');

    const invite = await t.as(first).AdminUserRpc.createInviteCode({ role: 'staff', maxUses: 1 });
    const joined = await signupFrom(address, { inviteCode: invite.code });
    assert.equal(joined.subscriptionId, first.subscriptionId);
    await t.ok('AuthRpc.signup', { email: `${name}@example.com`, username: name, password: PASSWORD }, from(newAddress()));
  });

  it('sees no proxy to warn about when TRUST_PROXY is on', () => {
    assert.deepEqual(
      t.logs.filter((line) => line.includes('TRUST_PROXY')),
      [],
    );
  });
});

describe('a proxy in front while TRUST_PROXY is off', () => {
  let t: TestApp;
  before(async () => {
    t = await startTestApp({ withNotes: false, plugins: ['auth', 'admin-user'], env: { LOGIN_IP_FAILURE_LIMIT: '5' } });
  });
  after(() => t.close());

  it('a flood of failed logins from the one address every client has does not lock out a user who never logged in', async () => {
    const admin = await t.signup();
    const name = uniqueName('newcomer');
    await t.as(admin).AdminUserRpc.create({ email: `${name}@example.com`, username: name, password: PASSWORD, role: 'user' });
    const flooded = await t.signup();
    // Over HTTP: every client comes from the proxy's one address.
    for (let attempt = 1; attempt <= 6; attempt++) {
      const target = attempt % 2 ? uniqueName('nobody') : flooded.user.username;
      assert.equal((await t.call('AuthRpc.login', { identifier: target, password: `wrong ${attempt}` })).status, 401, `attempt ${attempt}`);
    }
    assert.equal((await t.call('AuthRpc.login', { identifier: name, password: PASSWORD })).status, 200, 'the newcomer, first login');
    assert.equal((await t.call('AuthRpc.login', { identifier: flooded.user.username, password: PASSWORD })).status, 200, 'a user who signed up here');
  });

  const warnings = () => t.logs.filter((line) => line.includes('TRUST_PROXY')).map((line) => JSON.parse(line));

  it('is named in one warning, at the first request that carries X-Forwarded-For', async () => {
    // Over HTTP: the warning is about a request's header.
    await t.ok('AuthRpc.getClientConfig');
    assert.deepEqual(warnings(), [], 'no warning without the header');
    for (const ip of ['203.0.113.7', '203.0.113.8']) await t.ok('AuthRpc.getClientConfig', {}, from(ip));
    const [warning, ...more] = warnings();
    assert.equal(warning?.level, 40, 'a warning');
    assert.match(warning.msg, /TRUST_PROXY is off/);
    assert.ok(!JSON.stringify(warning).includes('203.0.113'), 'the client address stays out of the log');
    assert.deepEqual(more, [], 'only once');
  });
});
