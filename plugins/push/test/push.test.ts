import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { SERVICE_KEYRING_ID } from '../push.service.ts';
import { refused } from '../../../test/support/caller.ts';
import { startTestApp, type TestApp } from '../../../test/support/harness.ts';
import { addUser } from '../../../test/support/users.ts';

/** A browser's subscription as PushManager.subscribe gives it (keys are base64url). */
const browser = (id: string) => ({
  endpoint: `https://push.example.com/send/${id}`,
  keys: { p256dh: 'BNcRdreALRFXTkOOUHK1EtK2wtaz5Ry4YfYCA_0QTpQtUbVlUls0VJXg7A8u-Ts1XbjhazAkj7I99e8QcYP7DkM', auth: 'tBHItJI5svbpez7KI4CCXg' },
});

describe('PushNotificationRpc', () => {
  let t: TestApp;
  let owner: Awaited<ReturnType<TestApp['signup']>>;
  let stranger: Awaited<ReturnType<TestApp['signup']>>;
  const rows = () =>
    t.app.deps.db.execute<{ user_id: string; endpoint: string; channels: string[] }>(
      'select user_id, endpoint, channels from push_subscription order by endpoint',
    );

  before(async () => {
    t = await startTestApp({ withNotes: false, plugins: ['auth', 'push'] });
    owner = await t.signup();
    stranger = await t.signup();
  });
  after(() => t.close());

  it('answers one VAPID public key, made once, its private key sealed at rest', async () => {
    const { publicKey } = await t.as(owner).PushNotificationRpc.getVapidPublicKey();
    assert.match(publicKey, /^[A-Za-z0-9_-]{87}$/, 'an uncompressed P-256 point, base64url');
    assert.equal((await t.as(stranger).PushNotificationRpc.getVapidPublicKey()).publicKey, publicKey);
    const [stored] = await t.app.deps.db.execute<{ public_key: string; private_key_sealed: string }>(
      'select public_key, private_key_sealed from push_vapid_keys',
    );
    assert.equal(stored!.public_key, publicKey);
    assert.match(stored!.private_key_sealed, /^k1\./, 'sealed by the keyring');
    assert.match(await t.app.deps.keyring.open(SERVICE_KEYRING_ID, stored!.private_key_sealed), /^[A-Za-z0-9_-]{43}$/);
  });

  it('subscribes on the default channel, moves a known endpoint, and unsubscribes by endpoint only for its user', async () => {
    assert.deepEqual(await t.as(owner).PushNotificationRpc.subscribe({ subscriptionObject: browser('a') }), { success: true });
    await t.as(owner).PushNotificationRpc.subscribe({ subscriptionObject: browser('b'), channels: ['news', 'alerts', 'news'] });
    assert.deepEqual(
      (await rows()).map((row) => [row.endpoint, row.channels]),
      [
        ['https://push.example.com/send/a', ['default']],
        ['https://push.example.com/send/b', ['news', 'alerts']],
      ],
    );
    // The same browser subscribing again changes its channels, not the number of subscriptions.
    await t.as(owner).PushNotificationRpc.subscribe({ subscriptionObject: browser('a'), channels: ['alerts'] });
    assert.deepEqual(
      (await rows()).map((row) => row.channels),
      [['alerts'], ['news', 'alerts']],
    );
    // Knowing the endpoint without the browser's auth secret takes nothing over.
    const impostor = { ...browser('a'), keys: { ...browser('a').keys, auth: 'AAAAAAAAAAAAAAAAAAAAAA' } };
    const colleague = await addUser(t, owner.subscriptionId, 'user');
    await refused(t.as(colleague).PushNotificationRpc.subscribe({ subscriptionObject: impostor, channels: ['spam'] }), 'CONFLICT');
    assert.deepEqual(
      (await rows()).map((row) => [row.user_id, row.channels]),
      [
        [owner.user._id, ['alerts']],
        [owner.user._id, ['news', 'alerts']],
      ],
    );

    // Another user's unsubscribe of this endpoint changes nothing.
    assert.deepEqual(await t.as(stranger).PushNotificationRpc.unsubscribe({ subscriptionObject: browser('a') }), { success: true });
    assert.equal((await rows()).length, 2);
    await t.as(owner).PushNotificationRpc.unsubscribe({ subscriptionObject: { endpoint: browser('a').endpoint, keys: { p256dh: 'x', auth: 'y' } } });
    assert.deepEqual(
      (await rows()).map((row) => row.endpoint),
      ['https://push.example.com/send/b'],
    );
  });

  it('keeps endpoints per subscription: one another tenant subscribed is neither refused nor shown, and each sends to its own', async () => {
    const { pushService } = t.app.depsOf('push');
    const shared = browser('shared');
    await t.as(owner).PushNotificationRpc.subscribe({ subscriptionObject: shared, channels: ['news'] });
    // The same endpoint in another subscription, with other keys: its own subscription, not a CONFLICT telling that it exists.
    const elsewhere = { ...shared, keys: { ...shared.keys, auth: 'AAAAAAAAAAAAAAAAAAAAAA' } };
    assert.deepEqual(await t.as(stranger).PushNotificationRpc.subscribe({ subscriptionObject: elsewhere, channels: ['spam'] }), { success: true });
    const devices = async (session: typeof owner) =>
      ((await pushService.devices(session.subscriptionId, [session.user._id])) as { endpoint: string; auth: string }[])
        .filter((device) => device.endpoint === shared.endpoint)
        .map((device) => device.auth);
    assert.deepEqual(await devices(owner), [shared.keys.auth]);
    assert.deepEqual(await devices(stranger), [elsewhere.keys.auth]);
    assert.deepEqual(
      (await pushService.devices(owner.subscriptionId, [owner.user._id], ['spam'])).length,
      0,
      "the other tenant's channels are not the owner's",
    );
    // Within the owner's subscription the endpoint with another secret is still refused, and each tenant unsubscribes only its own.
    const colleague = await addUser(t, owner.subscriptionId, 'user');
    await refused(t.as(colleague).PushNotificationRpc.subscribe({ subscriptionObject: elsewhere }), 'CONFLICT');
    await t.as(stranger).PushNotificationRpc.unsubscribe({ subscriptionObject: shared });
    assert.deepEqual(await devices(stranger), []);
    assert.deepEqual(await devices(owner), [shared.keys.auth]);
  });

  it('refuses endpoints the outbound guard would not send to, and malformed subscriptions', async () => {
    for (const [subscriptionObject, path] of [
      [{ ...browser('c'), endpoint: 'http://10.0.0.1/push' }, 'subscriptionObject.endpoint'],
      [{ ...browser('c'), endpoint: 'ftp://push.example.com/x' }, 'subscriptionObject.endpoint'],
      [{ ...browser('c'), endpoint: 'not a url' }, 'subscriptionObject.endpoint'],
      [{ endpoint: browser('c').endpoint }, 'subscriptionObject.keys'],
      [{ ...browser('c'), keys: { p256dh: 'not base64!', auth: 'x' } }, 'subscriptionObject.keys.p256dh'],
      // Keys no message could be encrypted for (RFC 8291): a point of another size, an auth secret that is not 16 bytes.
      [{ ...browser('c'), keys: { ...browser('c').keys, p256dh: browser('c').keys.p256dh.slice(0, 40) } }, 'subscriptionObject.keys.p256dh'],
      [{ ...browser('c'), keys: { ...browser('c').keys, auth: 'tBHItJI5svbpez7K' } }, 'subscriptionObject.keys.auth'],
    ] as const) {
      const error = await refused(
        t.as(owner).call('PushNotificationRpc.subscribe', { subscriptionObject }),
        'VALIDATION_ERROR',
        JSON.stringify(subscriptionObject),
      );
      assert.equal(error.issues?.[0]?.path, path, JSON.stringify(subscriptionObject));
    }
    assert.equal(
      (await refused(t.as(owner).call('PushNotificationRpc.subscribe', { subscriptionObject: browser('c'), channels: [] }), 'VALIDATION_ERROR')).issues?.[0]
        ?.path,
      'channels',
    );
    await refused(t.as(null).PushNotificationRpc.subscribe({ subscriptionObject: browser('c') }), 'UNAUTHENTICATED');
    assert.ok(!(await rows()).some((row) => row.endpoint.endsWith('/c')));
  });

  it('forgets the browsers of a removed user', async () => {
    const member = await addUser(t, owner.subscriptionId, 'user');
    await t.as(member).PushNotificationRpc.subscribe({ subscriptionObject: browser('member') });
    assert.ok((await rows()).some((row) => row.user_id === member.user._id));
    const { userService } = t.app.depsOf('auth');
    const em = t.app.deps.db.forkEm(owner.subscriptionId);
    await userService.remove({ em, subscriptionId: owner.subscriptionId } as never, (await userService.findById({ em }, member.user._id))!);
    assert.ok(!(await rows()).some((row) => row.user_id === member.user._id));
  });
});
