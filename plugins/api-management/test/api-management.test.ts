import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { Webhook } from 'standardwebhooks';
import { retryAfterSeconds } from '../webhook-sender.ts';
import type { ApiManagementRpcGetDeliveriesParams } from '../../../test/support/caller.ts';
import { refused, type Credential } from '../../../test/support/caller.ts';
import { createScratchDatabase, TEST_DATABASE_URL } from '../../../test/support/database.ts';
import { startTestApp, type TestApp } from '../../../test/support/harness.ts';
import { eventually, startHttpReceiver, type ReceivedRequest, type Reply } from '../../../test/support/peers.ts';
import { addUser } from '../../../test/support/users.ts';

const SECRET = 'whsec-test-0123456789abcdef';
const PLUGINS = ['auth', 'admin-user', 'api-key', 'api-management', 'secrets'];
// The registration test's limit leaves a loaded machine room; the slow receiver below answers well past it.
const ENV = { OUTBOUND_ALLOW_PRIVATE: 'true', WEBHOOK_RETRY_SCHEDULE: '0,300ms,300ms', WEBHOOK_TEST_TIMEOUT_MS: '4000', JOBS_POLL_MS: '500' };

/** What a webhook request carries. */
interface WebhookPayload {
  id: string;
  type: string;
  timestamp: string;
  subscriptionId: string;
  data: Record<string, unknown>;
}

/** Checks a request as a receiver would, with the standardwebhooks package: signature, id and timestamp, and the X-Webhook-Secret header. */
function verified(request: ReceivedRequest, secret = SECRET): WebhookPayload {
  const payload = new Webhook(secret, { format: 'raw' }).verify(request.body, request.headers) as WebhookPayload;
  assert.equal(request.headers['x-webhook-secret'], secret);
  assert.equal(request.headers['content-type'], 'application/json');
  assert.equal(payload.id, request.headers['webhook-id']);
  assert.deepEqual(Object.keys(payload).sort(), ['data', 'id', 'subscriptionId', 'timestamp', 'type']);
  return payload;
}

type Receiver = Awaited<ReturnType<typeof startHttpReceiver>>;

describe('ApiManagementRpc: webhooks', () => {
  let t: TestApp;
  let admin: Awaited<ReturnType<TestApp['signup']>>;
  const receivers: Receiver[] = [];

  const receiver = async (reply?: (request: ReceivedRequest, index: number) => Reply) => {
    const started = await startHttpReceiver(reply);
    receivers.push(started);
    return started;
  };
  /** A new API key of the admin with a webhook registered at `url`; returns the key. */
  const keyWithWebhook = async (url: string, secret: string | undefined = SECRET) => {
    const key = await t.as(admin).ApiKeyRpc.create({ description: `hook ${receivers.length}` });
    const result = await t.as({ apiKey: key.fullKey }).ApiManagementRpc.registerWebhook({ webhookUrl: url, ...(secret ? { webhookSecret: secret } : {}) });
    return { ...key, result };
  };
  const secretEvent = (key: string, session: Credential = admin) => t.as(session).SecretsRpc.create({ zone: 'hooks', key, value: 'never-in-a-webhook' });
  const deliveriesOf = async (apiKeyId: string, state?: ApiManagementRpcGetDeliveriesParams['state']) =>
    (await t.as(admin).ApiManagementRpc.getDeliveries({ apiKeyId, ...(state ? { state } : {}) })).data;
  const keyRecord = async (id: string) => {
    const record = (await t.as(admin).ApiKeyRpc.getData()).data.find((key) => key._id === id);
    assert.ok(record, `API key ${id}`);
    return record;
  };
  /** Test events to the receiver are left out: the deliveries are what these tests follow. */
  const events = (r: Receiver) => r.requests.filter((request) => !request.body.includes('"webhook.test"'));

  before(async () => {
    t = await startTestApp({ withNotes: false, plugins: PLUGINS, env: ENV });
    admin = await t.signup();
  });
  after(async () => {
    await t.close();
    await Promise.all(receivers.map((r) => r.close()));
  });

  it('registers the webhook of the calling API key after a signed webhook.test event answered with 2xx', async () => {
    const r = await receiver();
    const key = await keyWithWebhook(`${r.url}/hooks`);
    assert.deepEqual(key.result, { success: true, status: 'verified' });
    assert.equal(r.requests.length, 1);
    const test = verified(r.requests[0]!);
    assert.equal(test.type, 'webhook.test');
    assert.equal(test.subscriptionId, admin.subscriptionId);
    assert.equal(test.data.apiKeyId, key._id);
    assert.equal(r.requests[0]!.path, '/hooks');

    const record = await keyRecord(key._id);
    assert.equal(record.webhookUrl, `${r.url}/hooks`);
    assert.equal(record.webhookStatus, 'verified');
    assert.equal(record.webhookSecret, '********');
    assert.ok(Date.parse(record.lastTestedAt!) > Date.now() - 60_000);
    const options = await t.as(admin).ApiManagementRpc.listApiKeysForWebhook();
    assert.ok(options.some((option) => option.value === key._id && option.label === key.description));
  });

  it('answers unreachable, with the reason, for a closed port, an error status or a slow answer', async () => {
    const closed = await receiver();
    await closed.close();
    const failing = await receiver(() => ({ status: 500 }));
    const slow = await receiver(() => ({ status: 200, delayMs: 12_000 }));
    for (const [url, reason] of [
      [closed.url, /ECONNREFUSED|fetch failed/],
      [failing.url, /answered 500/],
      [slow.url, /no answer within 4000 ms/],
    ] as const) {
      const { result, _id } = await keyWithWebhook(url);
      assert.equal(result.success, true);
      assert.equal(result.status, 'unreachable');
      assert.match(result.status === 'unreachable' ? result.error : '', reason);
      assert.equal((await keyRecord(_id)).webhookStatus, 'unreachable');
    }
  });

  it('refuses a session caller, short secrets and URLs that are not http(s)', async () => {
    const bySession = await refused(t.as(admin).ApiManagementRpc.registerWebhook({ webhookUrl: 'https://example.com/hook' }), 'BAD_REQUEST');
    assert.match(bySession.message, /X-API-Key/);
    const key = await t.as(admin).ApiKeyRpc.create({ description: 'validation' });
    for (const [params, path] of [
      [{ webhookUrl: 'https://example.com/hook', webhookSecret: 'fifteen-chars!!' }, 'webhookSecret'],
      [{ webhookUrl: 'not a url' }, 'webhookUrl'],
      [{ webhookUrl: 'ftp://example.com/hook' }, 'webhookUrl'],
      [{}, 'webhookUrl'],
    ] as const) {
      const error = await refused(t.as({ apiKey: key.fullKey }).call('ApiManagementRpc.registerWebhook', params), 'VALIDATION_ERROR', JSON.stringify(params));
      assert.equal(error.issues?.[0]?.path, path);
    }
    assert.equal((await keyRecord(key._id)).webhookUrl, null);
  });

  it("delivers the subscription's events signed, and retries a failing receiver with the same id until it succeeds", async () => {
    const r = await receiver((request, index) => ({ status: request.body.includes('"webhook.test"') || index >= 3 ? 200 : 500 }));
    const key = await keyWithWebhook(r.url);
    await secretEvent('RETRIED');
    const received = await eventually(() => (events(r).length >= 3 ? events(r) : undefined));
    const payloads = received.map((request) => verified(request));
    assert.equal(new Set(payloads.map((payload) => payload.id)).size, 1, 'the same webhook-id on every attempt');
    assert.equal(payloads[0]!.type, 'secret.changed');
    assert.equal(payloads[0]!.subscriptionId, admin.subscriptionId);
    assert.equal(payloads[0]!.data.key, 'RETRIED');
    assert.ok(!Number.isNaN(Date.parse(payloads[0]!.timestamp)));
    assert.ok(!r.requests.some((request) => request.body.includes('never-in-a-webhook')));

    await new Promise((resolve) => setTimeout(resolve, 1500));
    assert.equal(events(r).length, 3, 'delivered exactly once more after the failures');
    const [done] = await deliveriesOf(key._id);
    assert.equal(done.state, 'delivered');
    assert.equal(done.attempts, 3);
    assert.deepEqual(
      done.attemptLog.map((attempt) => attempt.statusCode),
      [500, 500, 200],
    );
    assert.equal(done.eventId, payloads[0]!.id);
  });

  it('keeps per-endpoint order: a later event waits while an earlier one is retried', async () => {
    let failures = 0;
    const r = await receiver((request) => {
      if (request.body.includes('"key":"FIRST"') && failures < 2) {
        failures += 1;
        return { status: 503 };
      }
      return { status: 200 };
    });
    await keyWithWebhook(r.url);
    await secretEvent('FIRST');
    await secretEvent('SECOND');
    await secretEvent('THIRD');
    const received = await eventually(() => (events(r).length >= 5 ? events(r) : undefined));
    assert.deepEqual(
      received.map((request) => verified(request).data.key),
      ['FIRST', 'FIRST', 'FIRST', 'SECOND', 'THIRD'],
    );
  });

  it('records events published back to back in their order', async () => {
    const r = await receiver();
    await keyWithWebhook(r.url);
    const published = Array.from({ length: 6 }, (_, index) =>
      t.app.deps.bus.publish({
        name: 'secret.changed',
        subscriptionId: admin.subscriptionId,
        payload: { action: 'created', _id: `ops:BURST_${index}`, zone: 'ops', key: `BURST_${index}`, description: '' },
      }),
    );
    await Promise.all(published);
    const received = await eventually(() => (events(r).length >= 6 ? events(r) : undefined));
    assert.deepEqual(
      received.map((request) => verified(request).data.key),
      ['BURST_0', 'BURST_1', 'BURST_2', 'BURST_3', 'BURST_4', 'BURST_5'],
    );
  });

  it('stops sending to the webhook of a disabled API key', async () => {
    const r = await receiver();
    const key = await keyWithWebhook(r.url);
    await t.as(admin).ApiKeyRpc.update({ _id: key._id, isEnabled: false });
    await secretEvent('WHILE_DISABLED');
    await new Promise((resolve) => setTimeout(resolve, 800));
    assert.equal(events(r).length, 0);
    const options = await t.as(admin).ApiManagementRpc.listApiKeysForWebhook();
    assert.ok(!options.some((option) => option.value === key._id));
    await refused(t.as(admin).ApiManagementRpc.resendDeliveries({ apiKeyId: key._id }), 'NOT_FOUND');
  });

  it('reads Retry-After as seconds or as an HTTP date', () => {
    const now = Date.parse('2026-11-23T12:00:00Z');
    assert.equal(retryAfterSeconds('120', now), 120);
    assert.equal(retryAfterSeconds('Mon, 23 Nov 2026 12:01:30 GMT', now), 90);
    assert.equal(retryAfterSeconds('Mon, 23 Nov 2026 11:00:00 GMT', now), 0);
    assert.equal(retryAfterSeconds('soon', now), null);
    assert.equal(retryAfterSeconds(null, now), null);
  });

  it('honours Retry-After on 503 and counts a redirect as a failure without following it', async () => {
    const r = await receiver((request, index): Reply => {
      if (request.body.includes('"webhook.test"')) return { status: 200 };
      if (request.path === '/elsewhere') return { status: 200 };
      return index === 1
        ? { status: 503, headers: { 'retry-after': '2' } }
        : index === 2
          ? { status: 302, headers: { location: '/elsewhere' } }
          : { status: 200 };
    });
    const key = await keyWithWebhook(r.url);
    await secretEvent('THROTTLED');
    const received = await eventually(() => (events(r).length >= 3 ? events(r) : undefined));
    assert.ok(received[1]!.at - received[0]!.at >= 1900, `the retry waited ${received[1]!.at - received[0]!.at} ms`);
    assert.ok(!r.requests.some((request) => request.path === '/elsewhere'));
    const [done] = await eventually(async () => {
      const delivered = await deliveriesOf(key._id, 'delivered');
      return delivered.length ? delivered : undefined;
    });
    assert.deepEqual(
      done.attemptLog.map((attempt) => attempt.statusCode),
      [503, 302, 200],
    );
    assert.match(done.attemptLog[1].error ?? '', /302 \(redirects are not followed\)/);
  });

  it('disables a webhook that answers 410 Gone at once, and sends it nothing more', async () => {
    const r = await receiver((request) => ({ status: request.body.includes('"webhook.test"') ? 200 : 410 }));
    const key = await keyWithWebhook(r.url);
    await secretEvent('GONE');
    await eventually(async () => ((await keyRecord(key._id)).webhookStatus === 'disabled' ? true : undefined));
    await secretEvent('AFTER_GONE');
    await new Promise((resolve) => setTimeout(resolve, 1200));
    assert.equal(events(r).length, 1);
    const [failed] = await deliveriesOf(key._id, 'failed');
    assert.equal(failed.lastStatusCode, 410);
    const options = await t.as(admin).ApiManagementRpc.listApiKeysForWebhook();
    assert.ok(!options.some((option) => option.value === key._id));
    await refused(t.as(admin).ApiManagementRpc.resendDeliveries({ apiKeyId: key._id }), 'BAD_REQUEST');
  });

  it('marks a webhook failing for its whole schedule unreachable; an admin lists the failed deliveries and re-sends them', async () => {
    let healthy = false;
    const r = await receiver((request) => ({ status: request.body.includes('"webhook.test"') || healthy ? 200 : 500 }));
    const key = await keyWithWebhook(r.url);
    await secretEvent('DOWN_1');
    await eventually(async () => ((await keyRecord(key._id)).webhookStatus === 'unreachable' ? true : undefined));
    assert.equal(events(r).length, 3, 'one attempt per entry of the schedule');
    const failed = await deliveriesOf(key._id, 'failed');
    assert.equal(failed.length, 1);
    assert.equal(failed[0].attempts, 3);
    assert.match(failed[0].lastError ?? '', /answered 500/);
    await secretEvent('WHILE_UNREACHABLE');
    await new Promise((resolve) => setTimeout(resolve, 800));
    assert.equal(events(r).length, 3, 'an unreachable webhook gets no new events');

    healthy = true;
    assert.deepEqual(await t.as(admin).ApiManagementRpc.resendDeliveries({ apiKeyId: key._id }), { resent: 1 });
    await eventually(() => (events(r).length === 4 ? true : undefined));
    assert.equal(verified(events(r)[3]!).id, failed[0].eventId);
    await eventually(async () => ((await keyRecord(key._id)).webhookStatus === 'verified' ? true : undefined));
    assert.equal((await deliveriesOf(key._id, 'failed')).length, 0);
  });

  it('checks each delivery again when it is sent: a resend after the key was narrowed sends nothing it no longer hears', async () => {
    let healthy = false;
    const r = await receiver((request) => ({ status: request.body.includes('"webhook.test"') || healthy ? 200 : 500 }));
    const key = await keyWithWebhook(r.url);
    await secretEvent('BEFORE_NARROWED');
    await eventually(async () => ((await keyRecord(key._id)).webhookStatus === 'unreachable' ? true : undefined));
    // Narrowed by its owner to a group that does not emit secret.changed: a resend must not send what was recorded under its earlier scopes.
    await t.as(admin).ApiKeyRpc.update({ _id: key._id, scopes: ['ApiKeyRpc'] });
    healthy = true;
    assert.deepEqual(await t.as(admin).ApiManagementRpc.resendDeliveries({ apiKeyId: key._id }), { resent: 1 });
    const [dropped] = await eventually(async () => {
      const failed = await deliveriesOf(key._id, 'failed');
      return failed.length === 1 && /no longer hears/.test(failed[0].lastError ?? '') ? failed : undefined;
    });
    assert.match(dropped.lastError ?? '', /no longer hears secret\.changed/);
    assert.equal(events(r).length, 3, 'the three attempts before it was narrowed, none after');
  });

  it('checks each retry again when it is sent: none after the key’s owner was deactivated', async () => {
    const member = await addUser(t, admin.subscriptionId, 'user');
    const memberKey = await t.as(member).ApiKeyRpc.create({ description: 'member hook' });
    // The first attempt's answer (a failure) is held until the owner is deactivated, so its retry surely comes after.
    const attempts: string[] = [];
    let release!: () => void;
    const deactivated = new Promise<void>((resolve) => (release = resolve));
    const server = createServer((req, res) => {
      const chunks: Buffer[] = [];
      req.on('data', (chunk: Buffer) => chunks.push(chunk));
      req.on('end', () => {
        const body = Buffer.concat(chunks).toString('utf8');
        if (body.includes('"webhook.test"')) return void res.writeHead(200).end();
        attempts.push(body);
        void deactivated.then(() => res.writeHead(500).end());
      });
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    try {
      const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
      assert.equal((await t.as({ apiKey: memberKey.fullKey }).ApiManagementRpc.registerWebhook({ webhookUrl: url })).status, 'verified');
      await secretEvent('BEFORE_DEACTIVATED');
      await eventually(() => (attempts.length === 1 ? true : undefined));
      await t.as(admin).AdminUserRpc.update({ _id: member.user._id, isActive: false });
      release();
      const [stopped] = await eventually(async () => {
        const failed = await deliveriesOf(memberKey._id, 'failed');
        return failed.length === 1 ? failed : undefined;
      });
      assert.equal(stopped.attempts, 1);
      assert.match(stopped.lastError ?? '', /deactivated/);
      assert.equal(attempts.length, 1, 'no attempt after its owner was deactivated');
    } finally {
      release();
      server.closeAllConnections();
      await new Promise((resolve) => server.close(resolve));
    }
  });

  it('keeps tenants apart and the administration to admins', async () => {
    const r = await receiver();
    const key = await keyWithWebhook(r.url);
    const other = await t.signup();
    await secretEvent('OTHER_TENANT', other);
    await secretEvent('OWN_TENANT');
    await eventually(() => (events(r).length >= 1 ? true : undefined));
    await new Promise((resolve) => setTimeout(resolve, 600));
    assert.deepEqual(
      events(r).map((request) => verified(request).data.key),
      ['OWN_TENANT'],
    );

    assert.deepEqual(await t.as(other).ApiManagementRpc.listApiKeysForWebhook(), []);
    assert.equal((await t.as(other).ApiManagementRpc.getDeliveries()).totalCount, 0);
    await refused(t.as(other).ApiManagementRpc.resendDeliveries({ apiKeyId: key._id }), 'NOT_FOUND');
    const member = await addUser(t, admin.subscriptionId, 'user');
    for (const method of ['listApiKeysForWebhook', 'getDeliveries'] as const) {
      await refused(t.as(member).ApiManagementRpc[method](), 'FORBIDDEN', method);
    }
    assert.ok(!t.logs.join('\n').includes(SECRET), 'the webhook secret never reaches the log');
  });
});

describe('ApiManagementRpc: the outbound guard and restarts', () => {
  it('refuses loopback, link-local and metadata addresses when private addresses are not allowed', async () => {
    const t = await startTestApp({ withNotes: false, plugins: PLUGINS });
    const r = await startHttpReceiver();
    try {
      const admin = await t.signup();
      const key = await t.as(admin).ApiKeyRpc.create({ description: 'guarded' });
      const viaKey = t.as({ apiKey: key.fullKey });
      for (const url of [r.url, `http://[::1]:${r.port}/`, 'http://169.254.169.254/latest/meta-data', 'http://10.1.2.3/hook']) {
        const error = await refused(viaKey.ApiManagementRpc.registerWebhook({ webhookUrl: url, webhookSecret: SECRET }), 'VALIDATION_ERROR', url);
        assert.match(error.issues?.[0]?.message ?? '', /publicly reachable/);
      }
      const named = await viaKey.ApiManagementRpc.registerWebhook({ webhookUrl: `http://localhost:${r.port}/`, webhookSecret: SECRET });
      assert.equal(named.status, 'unreachable');
      assert.match(named.status === 'unreachable' ? named.error : '', /not a public address/);
      assert.equal(r.requests.length, 0);
    } finally {
      await t.close();
      await r.close();
    }
  });

  it('loses nothing across a restart between attempts', async () => {
    const dataDir = mkdtempSync(path.join(tmpdir(), 'rpc-webhook-'));
    const scratch = TEST_DATABASE_URL ? await createScratchDatabase(TEST_DATABASE_URL) : undefined;
    const options = {
      dataDir,
      persistent: true,
      withNotes: false,
      plugins: PLUGINS,
      env: { ...ENV, WEBHOOK_RETRY_SCHEDULE: '0,2s' },
      ...(scratch ? { databaseUrl: scratch.url } : {}),
    };
    const r = await startHttpReceiver((request, index) => ({ status: request.body.includes('"webhook.test"') || index >= 2 ? 200 : 500 }));
    try {
      let t = await startTestApp(options);
      const admin = await t.signup();
      const key = await t.as(admin).ApiKeyRpc.create({ description: 'restart' });
      await t.as({ apiKey: key.fullKey }).ApiManagementRpc.registerWebhook({ webhookUrl: r.url, webhookSecret: SECRET });
      await t.as(admin).SecretsRpc.create({ zone: 'hooks', key: 'ACROSS_RESTART', value: 'x' });
      await eventually(() => (r.requests.length === 2 ? true : undefined));
      await t.close();
      t = await startTestApp(options);
      try {
        await eventually(() => (r.requests.length === 3 ? true : undefined));
        const [first, retry] = [r.requests[1]!, r.requests[2]!].map((request) => verified(request));
        assert.equal(retry!.id, first!.id);
        assert.equal(retry!.data.key, 'ACROSS_RESTART');
        await new Promise((resolve) => setTimeout(resolve, 1000));
        assert.equal(r.requests.length, 3);
      } finally {
        await t.close();
      }
    } finally {
      await r.close();
      await scratch?.drop();
      rmSync(dataDir, { recursive: true, force: true });
    }
  });

  it('takes over the webhooks stored on api_key, secrets sealed by the master key included, and ignores a deleted key', async () => {
    const dataDir = mkdtempSync(path.join(tmpdir(), 'rpc-webhook-move-'));
    const scratch = TEST_DATABASE_URL ? await createScratchDatabase(TEST_DATABASE_URL) : undefined;
    const options = { dataDir, persistent: true, withNotes: false, env: ENV, ...(scratch ? { databaseUrl: scratch.url } : {}) };
    const r = await startHttpReceiver();
    try {
      // Without api-management the webhook columns of api_key are still there, as before the move.
      let t = await startTestApp({ ...options, plugins: ['auth', 'api-key', 'secrets'] });
      const admin = await t.signup();
      const key = await t.as(admin).ApiKeyRpc.create({ description: 'moved' });
      const gone = await t.as(admin).ApiKeyRpc.create({ description: 'deleted later' });
      for (const { _id } of [key, gone]) {
        await t.app.deps.db.execute(
          `update api_key set webhook_url = ?, webhook_secret = ?, webhook_status = 'verified', last_tested_at = '2026-11-20T10:00:00Z' where id = ?`,
          [r.url, t.app.deps.secretBox.encrypt(SECRET), _id],
        );
      }
      await t.close();
      t = await startTestApp({ ...options, plugins: PLUGINS });
      try {
        const record = (await t.as(admin).ApiKeyRpc.getData()).data.find((candidate) => candidate._id === key._id);
        assert.deepEqual(
          [record?.webhookUrl, record?.webhookSecret, record?.webhookStatus, record?.lastTestedAt],
          [r.url, '********', 'verified', '2026-11-20T10:00:00.000Z'],
        );
        await t.as(admin).ApiKeyRpc.delete({ _id: gone._id });
        const options = await t.as(admin).ApiManagementRpc.listApiKeysForWebhook();
        assert.deepEqual(options, [{ value: key._id, label: 'moved' }]);
        await t.as(admin).SecretsRpc.create({ zone: 'hooks', key: 'MOVED', value: 'x' });
        await eventually(() => (r.requests.length === 1 ? true : undefined));
        assert.equal(verified(r.requests[0]!).data.key, 'MOVED');
        const columns = await t.app.deps.db.execute(
          `select column_name from information_schema.columns where table_name = 'api_key' and column_name like 'webhook%'`,
        );
        assert.deepEqual(columns, []);
      } finally {
        await t.close();
      }
    } finally {
      await r.close();
      await scratch?.drop();
      rmSync(dataDir, { recursive: true, force: true });
    }
  });
});
