import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { startTestApp, type TestApp } from '../support/harness.ts';

/**
 * Walks the operation registry, so every operation added later is covered
 * without anyone remembering to add it here.
 */
describe('every non-public operation requires a credential', async () => {
  let t: TestApp;
  before(async () => {
    t = await startTestApp();
  });
  after(() => t.close());

  it('the registry has operations to check', () => {
    const protectedOps = t.app.registry.all().filter((operation) => operation.access !== 'public');
    assert.ok(protectedOps.length >= 10, `only ${protectedOps.length}`);
    const publicOps = t.app.registry.all().filter((operation) => operation.access === 'public');
    assert.ok(publicOps.every((operation) => operation.group === 'AuthRpc'), 'only AuthRpc may be public');
  });

  it('answers 401 UNAUTHENTICATED without a credential, with a bad key and with a bad token', async () => {
    const protectedOps = t.app.registry.all().filter((operation) => operation.access !== 'public');
    for (const { method } of protectedOps) {
      for (const credential of [{}, { apiKey: 'ak0123456789abcd_' + 'x'.repeat(43) }, { token: 'not-a-session' }]) {
        const response = await t.call(method, {}, credential);
        assert.equal(response.status, 401, `${method} with ${JSON.stringify(credential)}`);
        assert.equal(response.body.success, false);
        assert.equal(response.body.data.code, 'UNAUTHENTICATED', method);
      }
    }
  });
});
