import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { after, describe, it } from 'node:test';
import { loadConfig } from '../../core/base/config.ts';
import { startTestApp, type TestApp } from '../support/harness.ts';
import { killLeftoverProcesses, runInProject, START_ARGS } from '../support/process.ts';

const OPEN_WARNING = '/metrics is open to anyone who reaches this address';
const warnings = (t: TestApp) =>
  t.logs.map((line) => JSON.parse(line) as { level: number; msg: string }).filter((entry) => entry.level === 40 && entry.msg.startsWith(OPEN_WARNING));

describe('/metrics access', () => {
  after(killLeftoverProcesses);

  it('with METRICS_TOKEN answers only a request bearing it (401 otherwise), and warns of nothing', async () => {
    const token = randomBytes(24).toString('base64url');
    const t = await startTestApp({ withNotes: false, plugins: ['auth'], env: { METRICS_TOKEN: token } });
    try {
      await t.call('AuthRpc.getClientConfig', {});
      const get = (authorization?: string) => fetch(`${t.url}/metrics`, { headers: authorization ? { authorization } : {} });
      for (const authorization of [undefined, `Bearer ${token.slice(0, -1)}`, `Bearer ${token}x`, token, `Basic ${token}`, 'Bearer ']) {
        const refused = await get(authorization);
        assert.equal(refused.status, 401, String(authorization));
        assert.equal(refused.headers.get('www-authenticate'), 'Bearer realm="metrics"');
        const body = await refused.text();
        assert.doesNotMatch(body, /rpc_calls_total/);
        assert.equal(JSON.parse(body).data.code, 'UNAUTHENTICATED');
      }
      const allowed = await get(`Bearer ${token}`);
      assert.equal(allowed.status, 200);
      assert.match(await allowed.text(), /^rpc_calls_total\{method="AuthRpc\.getClientConfig",code="OK"\} 1$/m);
      assert.equal(t.logs.join('\n').includes(token), false, 'the token is not logged');
      assert.deepEqual(warnings(t), []);
    } finally {
      await t.close();
    }
  });

  it('without METRICS_TOKEN warns at start when listening beyond loopback, not on loopback', async () => {
    const open = await startTestApp({ withNotes: false, plugins: ['auth'], host: '0.0.0.0' });
    try {
      assert.equal((await fetch(`${open.url}/metrics`)).status, 200);
      assert.equal(warnings(open).length, 1, open.logs.join('\n'));
    } finally {
      await open.close();
    }
    const local = await startTestApp({ withNotes: false, plugins: ['auth'] });
    try {
      assert.deepEqual(warnings(local), []);
    } finally {
      await local.close();
    }
  });

  it('refuses a short METRICS_TOKEN, and --print-config says it is set without printing it', async () => {
    assert.throws(() => loadConfig({ METRICS_TOKEN: 'short' }), /METRICS_TOKEN must be at least 16 characters/);
    assert.throws(() => loadConfig({ METRICS_TOKEN: 'has a space in the middle' }), /METRICS_TOKEN must not contain spaces/);
    const token = randomBytes(24).toString('base64url');
    const printed = runInProject(process.execPath, [...START_ARGS, '--print-config'], { METRICS_TOKEN: token, LOG_LEVEL: 'silent' });
    assert.deepEqual(await printed.exited(60_000), { code: 0, signal: null }, printed.stderr());
    const line = printed
      .stdout()
      .split('\n')
      .find((text) => text.startsWith('METRICS_TOKEN '));
    assert.match(line ?? '', /^METRICS_TOKEN +core +set /);
    assert.equal(printed.stdout().includes(token), false);
  });
});
