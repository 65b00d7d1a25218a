import assert from 'node:assert/strict';
import { createDecipheriv, createECDH, createPublicKey, hkdfSync, randomBytes, verify, type ECDH } from 'node:crypto';
import { createServer, type IncomingHttpHeaders } from 'node:http';
import type { AddressInfo } from 'node:net';
import { after, before, describe, it } from 'node:test';
import * as v from 'valibot';
import WebSocket from 'ws';
import { pushSenderSettings } from '../config.ts';
import type { PushNotificationRpcSubscribeParams, PushSenderRpcSendBroadcastParams } from '../../../test/support/caller.ts';
import { refused, type Credential } from '../../../test/support/caller.ts';
import { startTestApp, type Session, type TestApp } from '../../../test/support/harness.ts';
import { eventually } from '../../../test/support/peers.ts';
import { addUser, type Member } from '../../../test/support/users.ts';

const SUBJECT = 'mailto:push-ops@example.com';
/** How long the push service takes to answer: long enough that the sender's requests overlap. */
const ANSWER_DELAY_MS = 250;

interface PushRequest {
  path: string;
  headers: IncomingHttpHeaders;
  body: Buffer;
}

/** A browser's side of a push subscription: its ECDH key pair and auth secret (RFC 8291), made here so only this test can decrypt. */
interface Device {
  name: string;
  endpoint: string;
  ecdh: ECDH;
  publicKey: Buffer;
  authSecret: Buffer;
}

/**
 * A push service on loopback: keeps every request, answers 201 (or what
 * `statusOf` says for the path) after a delay, and tracks how many requests
 * it had under way at once.
 */
async function startPushService(statusOf: (path: string) => number) {
  const requests: PushRequest[] = [];
  let inFlight = 0;
  let maxInFlight = 0;
  const server = createServer((req, res) => {
    maxInFlight = Math.max(maxInFlight, ++inFlight);
    const chunks: Buffer[] = [];
    req.on('data', (chunk: Buffer) => chunks.push(chunk));
    req.on('end', () => {
      requests.push({ path: req.url ?? '', headers: req.headers, body: Buffer.concat(chunks) });
      setTimeout(() => {
        inFlight--;
        res.writeHead(statusOf(req.url ?? '')).end();
      }, ANSWER_DELAY_MS);
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    origin: `http://127.0.0.1:${port}`,
    port,
    requests,
    /** The most requests under way at once since the last call. */
    takeMaxInFlight() {
      const most = maxInFlight;
      maxInFlight = 0;
      return most;
    },
    close: () =>
      new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
      }),
  };
}

const base64url = (text: string) => Buffer.from(text, 'base64url');

/**
 * Checks the VAPID header (RFC 8292) as a push service does: `vapid t=<JWT>, k=<key>`, the key the
 * service publishes, an ES256 signature by it, the endpoint's origin as audience, an expiry within
 * 24 hours and the configured subject.
 */
function checkVapid(request: PushRequest, publicKey: string, origin: string): void {
  const match = /^vapid t=([\w-]+\.[\w-]+\.[\w-]+), k=([\w-]+)$/.exec(request.headers.authorization ?? '');
  assert.ok(match, `a VAPID Authorization header: ${request.headers.authorization}`);
  const [, jwt, key] = match;
  assert.equal(key, publicKey, 'k is the key getVapidPublicKey gives browsers');
  const [header, claims, signature] = jwt!.split('.') as [string, string, string];
  assert.deepEqual(JSON.parse(base64url(header).toString()), { typ: 'JWT', alg: 'ES256' });
  const point = base64url(publicKey);
  const verifier = createPublicKey({
    key: { kty: 'EC', crv: 'P-256', x: point.subarray(1, 33).toString('base64url'), y: point.subarray(33).toString('base64url') },
    format: 'jwk',
  });
  assert.ok(
    verify('sha256', Buffer.from(`${header}.${claims}`), { key: verifier, dsaEncoding: 'ieee-p1363' }, base64url(signature)),
    'signed with the VAPID private key',
  );
  const { aud, exp, sub } = JSON.parse(base64url(claims).toString()) as { aud: string; exp: number; sub: string };
  assert.equal(aud, origin, 'the audience is the origin of the endpoint');
  const now = Date.now() / 1000;
  assert.ok(exp > now && exp <= now + 24 * 3600, `exp ${exp} is in the future and within 24 h`);
  assert.equal(sub, SUBJECT);
}

const hkdf = (ikm: Buffer, salt: Buffer, info: Buffer, length: number) => Buffer.from(hkdfSync('sha256', ikm, salt, info, length));

/** Decrypts an aes128gcm push message body (RFC 8188 and RFC 8291) with the device's private key and auth secret. */
function decrypt(body: Buffer, device: Device): Buffer {
  const salt = body.subarray(0, 16);
  const recordSize = body.readUInt32BE(16);
  const keyIdLength = body[20]!;
  assert.equal(keyIdLength, 65, 'keyid is the sender’s uncompressed P-256 public key');
  const senderPublicKey = body.subarray(21, 21 + keyIdLength);
  assert.equal(senderPublicKey[0], 0x04);
  const record = body.subarray(21 + keyIdLength);
  assert.ok(record.length <= recordSize, 'one record');

  const ecdhSecret = device.ecdh.computeSecret(senderPublicKey);
  const keyInfo = Buffer.concat([Buffer.from('WebPush: info\0'), device.publicKey, senderPublicKey]);
  const ikm = hkdf(ecdhSecret, device.authSecret, keyInfo, 32);
  const contentKey = hkdf(ikm, salt, Buffer.from('Content-Encoding: aes128gcm\0'), 16);
  const nonce = hkdf(ikm, salt, Buffer.from('Content-Encoding: nonce\0'), 12);
  const decipher = createDecipheriv('aes-128-gcm', contentKey, nonce);
  decipher.setAuthTag(record.subarray(record.length - 16));
  const padded = Buffer.concat([decipher.update(record.subarray(0, record.length - 16)), decipher.final()]);
  // The last (and only) record: the plaintext, the delimiter 0x02, then zero padding.
  let end = padded.length - 1;
  while (end > 0 && padded[end] === 0) end--;
  assert.equal(padded[end], 0x02, 'the last-record delimiter');
  return padded.subarray(0, end);
}

describe('PushSenderRpc', () => {
  let t: TestApp;
  let push: Awaited<ReturnType<typeof startPushService>>;
  let vapidPublicKey: string;
  let admin: Session;
  let staff: Member;
  let member1: Member;
  let member2: Member;
  let member3: Member;
  let inactive: Member;
  let stranger: Session;
  const devices = new Map<string, Device>();

  /** Makes a device's keys, and subscribes it for the session's user. */
  async function subscribe(session: Credential, name: string, channels?: PushNotificationRpcSubscribeParams['channels']): Promise<void> {
    const ecdh = createECDH('prime256v1');
    const device: Device = { name, endpoint: `${push.origin}/push/${name}`, ecdh, publicKey: ecdh.generateKeys(), authSecret: randomBytes(16) };
    devices.set(name, device);
    const subscriptionObject = {
      endpoint: device.endpoint,
      keys: { p256dh: device.publicKey.toString('base64url'), auth: device.authSecret.toString('base64url') },
    };
    await t.as(session).PushNotificationRpc.subscribe({ subscriptionObject, ...(channels ? { channels } : {}) });
  }

  // The job service's own table tells which broadcast jobs exist; the job's state and output come through its API.
  const broadcastJobIds = async () =>
    (await t.app.deps.db.execute<{ id: string }>("select id from core_jobs.job where name = 'push-sender.broadcast' order by created_on, id")).map(
      (row) => row.id,
    );

  /** Sends a broadcast and waits for its job to finish: the answer's message, the job's report, and the requests the push service got. */
  async function broadcast(session: Credential, params: PushSenderRpcSendBroadcastParams) {
    const [requestsBefore, jobsBefore] = [push.requests.length, await broadcastJobIds()];
    const { message } = await t.as(session).PushSenderRpc.sendBroadcast(params);
    const queued = (await broadcastJobIds()).filter((id) => !jobsBefore.includes(id));
    assert.equal(queued.length, 1, 'one job per broadcast');
    const { jobs } = t.app.depsOf('push-sender');
    const job = await eventually(async () => {
      const view = await jobs.get('broadcast', queued[0]!);
      return view && ['done', 'dead'].includes(view.state) ? view : undefined;
    });
    assert.equal(job.state, 'done', String(job.lastError));
    return { message, jobId: job.id, report: job.output, requests: push.requests.slice(requestsBefore) };
  }

  /** Each request went to one of these devices, once each, signed, and decrypts to the payload. */
  function assertDelivered(requests: PushRequest[], deviceNames: string[], payload: Record<string, unknown>): void {
    assert.deepEqual(requests.map((request) => request.path.replace('/push/', '')).sort(), [...deviceNames].sort());
    for (const request of requests) {
      const device = devices.get(request.path.replace('/push/', ''))!;
      checkVapid(request, vapidPublicKey, push.origin);
      assert.equal(request.headers['content-encoding'], 'aes128gcm');
      assert.equal(request.headers['content-type'], 'application/octet-stream');
      assert.equal(request.headers.ttl, '86400');
      assert.deepEqual(JSON.parse(decrypt(request.body, device).toString('utf8')), payload, device.name);
    }
  }

  const notificationsOf = async (session: Credential) =>
    (await t.as(session).NotificationRpc.getData({ filter: { source: 'push-sender' }, pageSize: 100 })).data;
  const deviceNames = async () =>
    (await t.app.deps.db.execute<{ endpoint: string }>('select endpoint from push_subscription order by endpoint')).map((row) =>
      row.endpoint.replace(/^.*\/push\//, ''),
    );

  before(async () => {
    push = await startPushService((path) => ({ '/push/m3-gone': 410, '/push/m3-missing': 404, '/push/m3-broken': 500 })[path] ?? 201);
    t = await startTestApp({
      withNotes: false,
      plugins: ['auth', 'push', 'push-sender', 'notification'],
      env: { PUSH_VAPID_SUBJECT: SUBJECT, PUSH_SEND_CONCURRENCY: '2', OUTBOUND_ALLOWED_HOSTS: `127.0.0.1:${push.port}`, JOBS_POLL_MS: '500' },
    });
    admin = await t.signup();
    staff = await addUser(t, admin.subscriptionId, 'staff');
    member1 = await addUser(t, admin.subscriptionId, 'user');
    member2 = await addUser(t, admin.subscriptionId, 'user');
    member3 = await addUser(t, admin.subscriptionId, 'user');
    inactive = await addUser(t, admin.subscriptionId, 'user');
    stranger = await t.signup();
    vapidPublicKey = (await t.as(admin).PushNotificationRpc.getVapidPublicKey()).publicKey;

    await subscribe(admin, 'admin-phone');
    await subscribe(staff, 'staff-phone');
    await subscribe(member1, 'm1-phone', ['news']);
    await subscribe(member1, 'm1-laptop', ['alerts']);
    await subscribe(member2, 'm2-phone', ['news', 'alerts']);
    await subscribe(inactive, 'inactive-phone', ['news']);
    await subscribe(stranger, 'stranger-phone', ['news', 'alerts']);
    await t.app.deps.db.execute('update auth_user set is_active = false where id = ?', [inactive.user._id]);
  });
  after(async () => {
    await t?.close();
    await push?.close();
  });

  it('pushes to every device of the users listed, signed with VAPID and encrypted for each device, and notifies them in the app', async () => {
    const socket = new WebSocket(`${t.url.replace('http', 'ws')}/ws?token=${member2.token}`);
    const events: { type: string; event?: string; payload?: Record<string, unknown> }[] = [];
    socket.on('message', (data) => events.push(JSON.parse(data.toString())));
    try {
      await eventually(() => (events.some((event) => event.type === 'ready') ? true : undefined));
      const payload = { title: 'Maintenance tonight', body: 'From 22:00 to 23:00 UTC ✓', url: '/status' };
      const sent = await broadcast(staff, { targetType: 'users', targetIds: [member1.user._id, member2.user._id.toUpperCase()], payload });
      assert.equal(sent.message, 'Broadcast initiated: 2 users reached on 3 devices, 2 users notified in the app');
      assert.deepEqual(sent.report, { devices: 3, sent: 3, removed: 0, failed: 0 });
      assertDelivered(sent.requests, ['m1-phone', 'm1-laptop', 'm2-phone'], payload);
      assert.ok(
        sent.requests.every((request) => request.headers.topic === sent.jobId.replaceAll('-', '')),
        'the topic names the broadcast, so a retried one replaces what is still waiting',
      );

      for (const member of [member1, member2]) {
        assert.deepEqual(
          (await notificationsOf(member)).map(({ title, message, data }) => ({ title, message, data })),
          [{ title: payload.title, message: payload.body, data: { url: '/status' } }],
        );
      }
      assert.deepEqual(await notificationsOf(admin), [], 'users not listed get nothing in the app');
      // The job run again, as after its node died mid-send: nobody gets a second notification.
      const { broadcastService } = t.app.depsOf('push-sender');
      const ctx = t.app.deps.operations.contextOf({
        subscriptionId: admin.subscriptionId,
        userId: staff.user._id,
        role: 'staff',
        apiKeyId: null,
        sessionId: null,
        initialContext: null,
      });
      const rerun = { id: sent.jobId, name: 'push-sender.broadcast', attempt: 2, signal: new AbortController().signal };
      await broadcastService.deliver(ctx, { targetType: 'users', targetIds: [member1.user._id, member2.user._id], payload }, rerun);
      for (const member of [member1, member2]) assert.equal((await notificationsOf(member)).length, 1);
      const pushed = await eventually(() => events.find((event) => event.event === 'notification.created'));
      assert.deepEqual([pushed.payload?.title, pushed.payload?.source, pushed.payload?.userId], [payload.title, 'push-sender', member2.user._id]);
    } finally {
      socket.close();
    }
  });

  it('pushes to the devices on the channels named, of the caller’s subscription only', async () => {
    const payload = { title: 'Alert', body: 'Disk almost full' };
    const alerts = await broadcast(admin, { targetType: 'channels', targetIds: ['alerts'], payload });
    assert.equal(alerts.message, 'Broadcast initiated: 2 users reached on 2 devices, 2 users notified in the app');
    assertDelivered(alerts.requests, ['m1-laptop', 'm2-phone'], payload);

    const news = await broadcast(admin, {
      targetType: 'channels',
      targetIds: ['news', 'sports'],
      payload: { ...payload, url: 'https://news.example.com/today' },
    });
    assert.equal(news.message, 'Broadcast initiated: 2 users reached on 2 devices, 2 users notified in the app');
    assertDelivered(news.requests, ['m1-phone', 'm2-phone'], { ...payload, url: 'https://news.example.com/today' });
    assert.deepEqual(news.report, { devices: 2, sent: 2, removed: 0, failed: 0 });

    // A channel nobody listens on reaches nobody, and nothing is queued.
    const jobsBefore = (await broadcastJobIds()).length;
    const nobody = await t.as(admin).PushSenderRpc.sendBroadcast({ targetType: 'channels', targetIds: ['sports'], payload });
    assert.equal(nobody.message, 'Broadcast initiated: 0 users reached on 0 devices, 0 users notified in the app');
    assert.equal((await broadcastJobIds()).length, jobsBefore);
  });

  it('pushes to all of the subscription’s active users, a bounded number of requests at a time, and to no other subscription', async () => {
    const payload = { title: 'Hello everyone', body: 'New features are live', url: 'https://example.com/changelog?from=push#top' };
    push.takeMaxInFlight();
    const everyone = await broadcast(admin, { targetType: 'all', payload });
    assert.equal(everyone.message, 'Broadcast initiated: 4 users reached on 5 devices, 5 users notified in the app');
    assertDelivered(everyone.requests, ['admin-phone', 'staff-phone', 'm1-phone', 'm1-laptop', 'm2-phone'], payload);
    assert.equal(push.takeMaxInFlight(), 2, 'PUSH_SEND_CONCURRENCY requests at once, no more and no fewer');
    assert.equal((await notificationsOf(member3)).length, 1, 'a user without a device is still notified in the app');

    // targetIds are not used with all: another subscription's user named there changes nothing.
    const theirs = await broadcast(stranger, { targetType: 'all', targetIds: [admin.user._id], payload });
    assert.equal(theirs.message, 'Broadcast initiated: 1 user reached on 1 device, 1 user notified in the app');
    assertDelivered(theirs.requests, ['stranger-phone'], payload);
  });

  it('a payload of 3993 bytes fills the 4096 bytes a push service must accept, and is delivered whole', async () => {
    // Two-byte characters: the limit is on bytes, not characters.
    const room = 3993 - JSON.stringify({ title: 'Big', body: '' }).length;
    const payload = { title: 'Big', body: 'é'.repeat(Math.floor(room / 2)) + 'x'.repeat(room % 2) };
    assert.equal(Buffer.byteLength(JSON.stringify(payload)), 3993);
    const sent = await broadcast(admin, { targetType: 'users', targetIds: [member2.user._id], payload });
    assert.equal(sent.requests[0]!.body.length, 4096);
    assertDelivered(sent.requests, ['m2-phone'], payload);
  });

  it('deletes a device its push service says is gone (410, 404) in the same send; counts and logs other failures without the message or keys', async () => {
    for (const name of ['m3-gone', 'm3-missing', 'm3-broken', 'm3-ok']) await subscribe(member3, name);
    const before = await deviceNames();
    const payload = { title: 'Secret sale', body: 'Only for you: 30% off' };
    const sent = await broadcast(staff, { targetType: 'users', targetIds: [member3.user._id], payload });
    assert.equal(sent.message, 'Broadcast initiated: 1 user reached on 4 devices, 1 user notified in the app');
    assert.deepEqual(sent.report, { devices: 4, sent: 1, removed: 2, failed: 1 });
    assert.deepEqual(
      await deviceNames(),
      before.filter((name) => name !== 'm3-gone' && name !== 'm3-missing'),
    );

    const failed = t.logs.map((line) => JSON.parse(line)).find((entry) => entry.msg === 'push failed');
    assert.deepEqual([failed.status, failed.broadcastId, failed.host], [500, sent.jobId, `127.0.0.1:${push.port}`]);
    const secrets = [
      payload.title,
      payload.body,
      ...[...devices.values()].flatMap((device) => [device.publicKey.toString('base64url'), device.authSecret.toString('base64url')]),
    ];
    const [{ private_key_sealed: sealed }] = await t.app.deps.db.execute<{ private_key_sealed: string }>('select private_key_sealed from push_vapid_keys');
    secrets.push(await t.app.deps.keyring.open('00000000-0000-0000-0000-000000000000', sealed!));
    for (const line of t.logs) {
      for (const secret of secrets) assert.ok(!line.includes(secret), `a log line holds a secret: ${line.slice(0, 200)}`);
    }
  });

  it('refuses callers without a staff role, bad targets and bad payloads before anything is sent or stored', async () => {
    const jobsBefore = (await broadcastJobIds()).length;
    const requestsBefore = push.requests.length;
    const notificationsBefore = (await notificationsOf(member1)).length;
    const payload = { title: 'Hi', body: 'There' };
    /** A broadcast as the staff member, with params the types may refuse on purpose. */
    const send = (params: unknown) => t.as(staff).call('PushSenderRpc.sendBroadcast', params);

    await refused(t.as(member1).PushSenderRpc.sendBroadcast({ targetType: 'all', payload }), 'FORBIDDEN');
    const oversized = { title: 'T', body: 'é'.repeat(1985) + 'a' };
    assert.equal(Buffer.byteLength(JSON.stringify(oversized)), 3994);
    for (const [params, path, mentions] of [
      [{ targetType: 'users', payload }, 'targetIds', 'at least one user id'],
      [{ targetType: 'channels', targetIds: [], payload }, 'targetIds', 'at least one channel'],
      [{ targetType: 'channels', targetIds: ['  '], payload }, 'targetIds.0', 'must not be empty'],
      [{ targetType: 'users', targetIds: Array.from({ length: 1001 }, (_, index) => `id${index}`), payload }, 'targetIds', 'at most 1000'],
      [{ targetType: 'users', targetIds: [member1.user._id, stranger.user._id], payload }, 'targetIds', stranger.user._id],
      [{ targetType: 'users', targetIds: ['not-a-user'], payload }, 'targetIds', 'not-a-user'],
      [{ targetType: 'users', targetIds: [inactive.user._id], payload }, 'targetIds', inactive.user._id],
      [{ targetType: 'everyone', payload }, 'targetType', 'all, users or channels'],
      [{ targetType: 'all' }, 'payload', 'payload'],
      [{ targetType: 'all', payload: { ...payload, title: '' } }, 'payload.title', 'must not be empty'],
      [{ targetType: 'all', payload: { ...payload, title: '   ' } }, 'payload.title', 'must not be empty'],
      [{ targetType: 'all', payload: { title: 'Hi' } }, 'payload.body', 'body'],
      [{ targetType: 'all', payload: { ...payload, url: 'javascript:alert(1)' } }, 'payload.url', 'http(s) URL'],
      [{ targetType: 'all', payload: { ...payload, url: '//evil.example/x' } }, 'payload.url', 'http(s) URL'],
      [{ targetType: 'all', payload: { ...payload, url: '/\\evil.example' } }, 'payload.url', 'http(s) URL'],
      [{ targetType: 'all', payload: oversized }, 'payload', '3994 bytes'],
    ] as const) {
      const error = await refused(send(params), 'VALIDATION_ERROR', JSON.stringify(params).slice(0, 200));
      assert.equal(error.issues?.[0]?.path, path, JSON.stringify(params).slice(0, 200));
      assert.ok(error.message.includes(mentions), `${error.message} mentions ${mentions}`);
    }
    assert.ok(
      !(await refused(send({ targetType: 'users', targetIds: [member1.user._id, stranger.user._id], payload }), 'VALIDATION_ERROR')).message.includes(
        member1.user._id,
      ),
      'only the ids refused are named',
    );

    assert.equal((await broadcastJobIds()).length, jobsBefore, 'nothing queued');
    assert.equal(push.requests.length, requestsBefore, 'nothing pushed');
    assert.equal((await notificationsOf(member1)).length, notificationsBefore, 'nothing notified');
  });

  it('accepts only an https URL or a mailto: address at a public host as the VAPID subject, and stops start-up otherwise', async () => {
    const accepts = (value: string) => v.safeParse(pushSenderSettings, { PUSH_VAPID_SUBJECT: value }).success;
    for (const good of ['mailto:push@example.com', 'https://example.com/contact', 'https://push.example.co.uk', 'mailto:ops@8.8.8.8']) {
      assert.ok(accepts(good), good);
    }
    for (const bad of [
      'mailto:push@localhost',
      'mailto:push@app.localhost',
      'mailto:push@127.0.0.1',
      'mailto:push@[::1]',
      'mailto:push@example.com?subject=hi',
      'mailto:@example.com',
      'mailto:push@intranet',
      'https://localhost/contact',
      'https://LOCALHOST./',
      'https://push.localhost',
      'https://127.0.0.1',
      'https://127.1',
      'https://0x7f.0.0.1',
      'https://[::1]/',
      'https://10.1.2.3',
      'http://example.com',
      'push@example.com',
      'ftp://example.com',
    ]) {
      assert.ok(!accepts(bad), bad);
    }
    await assert.rejects(
      startTestApp({ withNotes: false, plugins: ['auth', 'push', 'push-sender'], env: { PUSH_VAPID_SUBJECT: 'mailto:push@localhost' } }),
      (error: Error) => error.name === 'ConfigError' && /PUSH_VAPID_SUBJECT must be an https: URL or a mailto: address/.test(error.message),
    );
  });

  it('answers FEATURE_UNAVAILABLE, naming the setting, when no VAPID subject is configured', async () => {
    const unconfigured = await startTestApp({ withNotes: false, plugins: ['auth', 'push', 'push-sender'] });
    try {
      const owner = await unconfigured.signup();
      const error = await refused(
        unconfigured.as(owner).PushSenderRpc.sendBroadcast({ targetType: 'all', payload: { title: 'Hi', body: 'There' } }),
        'FEATURE_UNAVAILABLE',
      );
      assert.match(error.message, /PUSH_VAPID_SUBJECT/);
    } finally {
      await unconfigured.close();
    }
  });
});
