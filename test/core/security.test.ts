import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { startTestApp, type TestApp } from '../support/harness.ts';
import { addUser } from '../support/users.ts';

/**
 * Walks the operation registry, so every operation added later is covered
 * without anyone remembering to add it here.
 */
describe('access declared by every operation is enforced', async () => {
  let t: TestApp;
  before(async () => {
    t = await startTestApp();
  });
  after(() => t.close());

  const operations = (...access: string[]) => t.app.registry.all().filter((operation) => access.includes(operation.access));

  it('the registry has operations to check', () => {
    assert.ok(operations('user', 'staff', 'admin').length >= 10, `only ${operations('user', 'staff', 'admin').length}`);
    assert.ok(operations('admin').length >= 5);
    // Besides AuthRpc, only the second step of a sign-in, called before there is a session (plugins/account-security, signIn: true).
    assert.deepEqual(
      operations('public')
        .filter((operation) => operation.group !== 'AuthRpc')
        .map((operation) => operation.method)
        .sort(),
      [
        'AccountSecurityRpc.beginPasskeyRegistration',
        'AccountSecurityRpc.beginPasskeySignIn',
        'AccountSecurityRpc.beginTotpEnrolment',
        'AccountSecurityRpc.confirmTotpEnrolment',
        'AccountSecurityRpc.finishPasskeyRegistration',
        'AccountSecurityRpc.finishPasskeySignIn',
        'AccountSecurityRpc.getSignIn',
        'AccountSecurityRpc.verifySecondFactor',
      ],
    );
  });

  it('answers 401 UNAUTHENTICATED without a credential, with a bad key and with a bad token', async () => {
    for (const { method } of operations('user', 'staff', 'admin')) {
      for (const credential of [{}, { apiKey: 'ak0123456789abcd_' + 'x'.repeat(43) }, { token: 'not-a-session' }]) {
        const response = await t.call(method, {}, credential);
        assert.equal(response.status, 401, `${method} with ${JSON.stringify(credential)}`);
        assert.equal(response.body.success, false);
        assert.equal(response.body.data.code, 'UNAUTHENTICATED', method);
      }
    }
  });

  it('answers 403 FORBIDDEN to a role-user credential for every staff and admin operation, and to staff for admin ones', async () => {
    const owner = await t.signup();
    const user = await addUser(t, owner.subscriptionId, 'user');
    const staff = await addUser(t, owner.subscriptionId, 'staff');
    const userKey = await t.as(user).ApiKeyRpc.create({ description: 'a user key' });
    const refusals: [string, { token?: string; apiKey?: string }][] = [
      ...operations('staff', 'admin').flatMap(({ method }) => [
        [method, { token: user.token }] as [string, { token: string }],
        [method, { apiKey: userKey.fullKey }] as [string, { apiKey: string }],
      ]),
      ...operations('admin').map(({ method }) => [method, { token: staff.token }] as [string, { token: string }]),
    ];
    for (const [method, credential] of refusals) {
      const response = await t.call(method, {}, credential);
      assert.equal(response.status, 403, `${method} as ${JSON.stringify(credential).slice(0, 12)}`);
      assert.equal(response.body.data.code, 'FORBIDDEN', method);
    }
    // The owner (admin) passes the role check: whatever answer comes back, it is not FORBIDDEN.
    for (const { method } of operations('staff', 'admin')) {
      assert.notEqual((await t.call(method, {}, { token: owner.token })).body.data?.code, 'FORBIDDEN', method);
    }
  });
});
