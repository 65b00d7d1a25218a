import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { after, before, describe, it } from 'node:test';
import WebSocket from 'ws';
import { definePlugin, SESSION_COOKIE, type Deps } from '../../core/plugin/sdk.ts';
import { startTestApp, type TestApp } from '../support/harness.ts';
import { eventually, startHttpReceiver } from '../support/peers.ts';
import { tinyPng } from '../support/uploads.ts';
import type { WsMessage } from '../support/wire.ts';

/**
 * Every door holds an API key's limits (docs/decisions/0057-every-door-admits-by-the-same-step.md).
 * Generated: for every operation of the registry
 * and every route the service mounts (its own, uploads and downloads, git
 * over HTTP, plugin routes), and for the WebSocket and webhooks, what each
 * kind of limited key may do is derived from what the door declares (its
 * group or operations, its kind), and the door must answer accordingly.
 */

interface Route {
  method: string;
  path: string;
  access: string;
  serves: string | string[] | null | { perRequest: string };
  kind: 'read' | 'write';
}

interface Limited {
  name: string;
  key: string;
  keyId: string;
  scopes: string[] | null;
  readOnly: boolean;
}

/** What the key's limits allow at a site of this group (and, for a route, these operations), as plugins/api-key/README.md states them. */
function allows(key: Limited, site: { group: string | null; method?: string; operations?: string[]; kind: 'read' | 'write' }): boolean {
  if (key.readOnly && site.kind !== 'read') return false;
  if (!key.scopes || site.group === null) return true;
  const names = [site.group, site.method, ...(site.operations ?? []).flatMap((operation) => [operation, operation.split('.')[0]])];
  return names.some((name) => name !== undefined && key.scopes!.includes(name));
}

/** A refusal for the key's limits (not for the role, a missing record or bad params). */
const refusedForLimits = (status: number, text: string) => status === 403 && /This API key (may not|is read-only)/.test(text);

const ENV = {
  WS_ALLOWED_ORIGINS: 'https://app.example.com',
  OUTBOUND_ALLOW_PRIVATE: 'true',
  WEBHOOK_RETRY_SCHEDULE: '0,300ms',

  JOBS_POLL_MS: '500',
};

describe('every door holds an API key’s limits', () => {
  let t: TestApp;
  let owner: Awaited<ReturnType<TestApp['signup']>>;
  let routes: Route[];
  const keys: Limited[] = [];
  let limitedKey: string;
  const receiver = startHttpReceiver();
  /** Route parameters, filled for each route the service mounts; a new route needs its own here. */
  const params: Record<string, string> = {
    repository: 'doors.git',
    folder: 'ab',
    file: '0'.repeat(38),
    provider: 'doors',
    rest: 'index.html',
  };
  /** The group each route that finds what it serves per request serves in this test (its upload key's or file's purpose). */
  const perRequestGroup = 'UserProfileRpc';

  before(async () => {
    t = await startTestApp({ env: ENV });
    owner = await t.signup();
    const { url } = await receiver;
    const make = async (name: string, limits: { scopes?: string[]; readOnly?: boolean; rateLimitPerMinute?: number }) => {
      // The webhook is registered by the key while it has no limits, then the owner narrows it.
      const created = await t.ok<{ _id: string; fullKey: string }>('ApiKeyRpc.create', { description: name }, { token: owner.token });
      const registered = await t.ok<{ status: string }>('ApiManagementRpc.registerWebhook', { webhookUrl: `${url}/${name}` }, { apiKey: created.fullKey });
      assert.equal(registered.status, 'verified');
      await t.ok('ApiKeyRpc.update', { _id: created._id, ...limits }, { token: owner.token });
      return { name, key: created.fullKey, keyId: created._id, scopes: limits.scopes ?? null, readOnly: limits.readOnly ?? false };
    };
    keys.push(await make('tasks', { scopes: ['TaskRpc', 'NoteRpc.list'] }));
    keys.push(await make('profile', { scopes: ['UserProfileRpc', 'CheckpointRpc', 'NoteRpc'] }));
    keys.push(await make('reader', { readOnly: true }));
    const limited = await make('limited', { rateLimitPerMinute: 1 });
    limitedKey = limited.key;
    // The limited key's webhook: a key's rate counts the calls it makes, not the events it is sent.
    keys.push({ ...limited, scopes: null, readOnly: false });

    routes = (await (await fetch(`${t.url}/api/rpc`)).json()).data.routes;
    // A finished file and an open upload key, both of UserProfileRpc's purpose.
    const picture = await t.ok<{ uploadKey: string }>('UserProfileRpc.getUploadKeyForProfilePicture', {}, { token: owner.token });
    await upload(picture.uploadKey, { authorization: `Bearer ${owner.token}` });
    const profile = await t.ok<{ profilePicture: string }>('UserProfileRpc.updateProfilePicture', { uploadKey: picture.uploadKey }, { token: owner.token });
    params.fileId = profile.profilePicture.split('/').pop()!;
    params.uploadKey = (await t.ok<{ uploadKey: string }>('UserProfileRpc.getUploadKeyForProfilePicture', {}, { token: owner.token })).uploadKey;
  });
  after(async () => {
    await t.close();
    await (await receiver).close();
  });

  const upload = (uploadKey: string, headers: Record<string, string>) =>
    fetch(`${t.url}/api/uploads/${uploadKey}`, { method: 'PUT', headers: { ...headers, 'content-type': 'image/png' }, body: new Uint8Array(tinyPng()) });

  /** One request to a route with a key: PUT and POST send a picture (multipart for POST), as an upload would. */
  async function visit(route: Route, key: string): Promise<{ status: number; text: string }> {
    const path = route.path.replace(/[:*](\w+)/g, (_match, name: string) => {
      assert.ok(params[name] !== undefined, `the door test has no value for :${name} of ${route.method} ${route.path}: add one`);
      return params[name]!;
    });
    const init: RequestInit = { method: route.method, headers: { 'x-api-key': key } };
    if (route.method === 'PUT') init.headers = { 'x-api-key': key, 'content-type': 'image/png' };
    if (route.method === 'PUT' || route.method === 'POST') {
      if (route.method === 'POST') {
        const form = new FormData();
        form.append('file', new Blob([new Uint8Array(tinyPng())], { type: 'image/png' }), 'door.png');
        init.body = form;
      } else init.body = new Uint8Array(tinyPng());
    }
    const response = await fetch(`${t.url}${path}`, init);
    return { status: response.status, text: await response.text() };
  }

  const call = async (method: string, key: string) => {
    const response = await t.call(method, {}, { apiKey: key });
    return { status: response.status, text: JSON.stringify(response.body) };
  };

  /** Spends the limited key's one call of this minute, then knocks: a door that counts answers 429 (tried twice, in case a minute turned in between). */
  async function overLimit(knock: () => Promise<{ status: number }>): Promise<number> {
    let status = 0;
    for (let attempt = 0; attempt < 2 && status !== 429; attempt++) {
      while ((await t.call('NoteRpc.whoAmI', {}, { apiKey: limitedKey })).status !== 429);
      status = (await knock()).status;
    }
    return status;
  }

  it('admits every operation of the registry exactly as each key’s scopes and read-only flag say, and refuses them all past the rate', async () => {
    const operations = t.app.registry.all();
    assert.ok(operations.length > 100, 'the whole registry');
    for (const operation of operations) {
      for (const key of keys.slice(0, 3)) {
        const { status, text } = await call(operation.method, key.key);
        const expected = allows(key, { group: operation.group, method: operation.method, kind: operation.kind ?? 'write' });
        assert.equal(!refusedForLimits(status, text), expected, `${operation.method} with the ${key.name} key: ${status} ${text}`);
      }
      assert.equal(await overLimit(() => call(operation.method, limitedKey)), 429, `${operation.method} past the rate`);
    }
  });

  it('makes every route declare what it serves, and admits each as the keys’ limits say: core routes, uploads, downloads, git, plugin routes', async () => {
    const paths = routes.map((route) => `${route.method} ${route.path}`);
    for (const expected of [
      'GET /notes/export',
      'GET /api/files/:fileId',
      'PUT /api/uploads/:uploadKey',
      'POST /api/uploads/:uploadKey',
      'GET /checkpoints/:repository/info/refs',
    ]) {
      assert.ok(paths.includes(expected), `${expected} among ${paths.join(', ')}`);
    }
    for (const route of routes) {
      // Each route's own declaration, never a default (core/doors/route.ts refuses a route without one).
      assert.ok(route.kind === 'read' || route.kind === 'write', `${route.method} ${route.path} declares its kind`);
      assert.ok(route.serves !== undefined, `${route.method} ${route.path} declares what it serves`);
      const serves = route.serves;
      const site =
        serves === null || typeof serves === 'string'
          ? { group: serves, kind: route.kind }
          : Array.isArray(serves)
            ? { group: serves[0]!.split('.')[0]!, operations: serves, kind: route.kind }
            : { group: perRequestGroup, kind: route.kind };
      for (const key of keys.slice(0, 3)) {
        const { status, text } = await visit(route, key.key);
        assert.equal(
          !refusedForLimits(status, text),
          allows(key, site),
          `${route.method} ${route.path} with the ${key.name} key: ${status} ${text.slice(0, 300)}`,
        );
      }
      assert.equal(await overLimit(() => visit(route, limitedKey)), 429, `${route.method} ${route.path} past the rate`);
    }
  });

  it('sends each key, on its WebSocket and at its webhook alike, exactly the events its scopes hear', async () => {
    const events: { name: string; group: string; raise: () => Promise<unknown> }[] = [
      {
        name: 'task.created',
        group: 'TaskRpc',
        raise: () => t.ok('TaskRpc.create', { taskInstanceId: 'doors', title: 'heard by some' }, { token: owner.token }),
      },
      { name: 'note.added', group: 'NoteRpc', raise: () => t.ok('NoteRpc.add', { text: 'heard by some' }, { token: owner.token }) },
      { name: 'secret.changed', group: 'SecretsRpc', raise: () => t.ok('SecretsRpc.create', { zone: 'doors', key: 'K', value: 'v' }, { token: owner.token }) },
    ];
    const sockets = await Promise.all(keys.slice(0, 3).map((key) => open(key.key)));
    for (const socket of sockets) assert.equal(socket.status, 101);
    for (const event of events) await event.raise();
    // Only the events raised here: a plugin may follow one with its own (the notes plugin's tally).
    const raised = (name: string) => events.some((event) => event.name === name);
    // What each webhook is sent, as its deliveries are written (one transaction per event for every webhook of the subscription).
    const delivered = async (key: Limited): Promise<string[]> =>
      (await t.ok<{ data: { eventType: string }[] }>('ApiManagementRpc.getDeliveries', { apiKeyId: key.keyId }, { token: owner.token })).data
        .map((delivery) => delivery.eventType)
        .filter(raised);
    // The reader key hears every event: once it has them all, every delivery is written.
    await eventually(async () => ((await delivered(keys[2]!)).length === events.length ? true : undefined));
    for (const [index, socket] of sockets.entries()) {
      await socket.flush();
      const key = keys[index]!;
      const heard = socket.messages
        .filter((message) => message.type === 'event')
        .map((message) => message.event)
        .filter(raised);
      const expected = events
        .filter((event) => allows(key, { group: event.group, kind: 'read', operations: key.scopes?.filter((scope) => scope.startsWith(`${event.group}.`)) }))
        .map((event) => event.name);
      assert.deepEqual(heard.sort(), [...expected].sort(), `the ${key.name} key's WebSocket`);
      assert.deepEqual((await delivered(key)).sort(), [...expected].sort(), `the ${key.name} key's webhook`);
      socket.ws.close();
    }
    assert.deepEqual(
      (await delivered(keys[3]!)).sort(),
      events.map((event) => event.name).sort(),
      "the limited key's webhook: its rate counts its calls, not what it is sent",
    );
    assert.equal(await overLimit(async () => ({ status: (await open(limitedKey)).status })), 429, 'a WebSocket opening past the rate');
  });

  it('takes the session cookie on /ws only from pages of the service or allowed origins; credentials in headers from anywhere', async () => {
    const status = (headers: Record<string, string>) => open(headers).then(({ ws, status }) => (ws.close(), status));
    const cookie = `${SESSION_COOKIE}=${owner.token}`;
    assert.equal(await status({ cookie, origin: 'https://evil.example' }), 403);
    assert.equal(await status({ cookie, origin: 'null' }), 403);
    assert.equal(await status({ cookie, origin: t.url }), 101);
    assert.equal(await status({ cookie, origin: 'https://app.example.com' }), 101);
    assert.equal(await status({ cookie }), 101, 'no Origin: not a page of any site');
    assert.equal(await status({ authorization: `Bearer ${owner.token}`, origin: 'https://evil.example' }), 101);
    assert.equal(await status({ 'x-api-key': keys[2]!.key, origin: 'https://evil.example' }), 101);
  });

  /** Opens /ws with a key (or these headers): its messages as they come, and a round trip that flushes what the server sent before it. */
  async function open(credential: string | Record<string, string>) {
    const headers = typeof credential === 'string' ? { 'x-api-key': credential } : credential;
    const ws = new WebSocket(`${t.url.replace('http', 'ws')}/ws`, { headers });
    const messages: WsMessage[] = [];
    let pong: (() => void) | undefined;
    ws.on('message', (data) => {
      const message = JSON.parse(data.toString()) as WsMessage;
      if (message.type === 'pong') pong?.();
      messages.push(message);
    });
    const status = await new Promise<number>((resolve) => {
      ws.once('open', () => resolve(101));
      ws.once('unexpected-response', (_request, response) => resolve(response.statusCode ?? 0));
      ws.once('error', () => undefined);
    });
    const flush = () => new Promise<void>((resolve) => ((pong = resolve), ws.send('{"type":"ping"}')));
    return { ws, status, messages, flush };
  }
});

/**
 * What a limited key was found to reach, through public doors only (no route
 * listing), so each also runs against a service from before the routes
 * declared what they serve: every door beside what an unlimited credential
 * gets there. A scoped key's webhook is the generated event test's above.
 */
describe('each door a limited key was found to pass', () => {
  let t: TestApp;
  let owner: Awaited<ReturnType<TestApp['signup']>>;
  const keyWith = (limits: Record<string, unknown>) =>
    t.ok<{ _id: string; fullKey: string }>('ApiKeyRpc.create', { description: 'finding', ...limits }, { token: owner.token });

  before(async () => {
    t = await startTestApp({ env: ENV });
    owner = await t.signup();
  });
  after(() => t.close());

  it('refuses a TaskRpc-scoped key GET /notes/export, GET /api/files/<id> and a git clone of /checkpoints/<scope>.git', async () => {
    const scoped = (await keyWith({ scopes: ['TaskRpc'] })).fullKey;
    const unlimited = (await keyWith({})).fullKey;
    const picture = await t.ok<{ uploadKey: string }>('UserProfileRpc.getUploadKeyForProfilePicture', {}, { token: owner.token });
    const put = await fetch(`${t.url}/api/uploads/${picture.uploadKey}`, {
      method: 'PUT',
      headers: { authorization: `Bearer ${owner.token}`, 'content-type': 'image/png' },
      body: new Uint8Array(tinyPng()),
    });
    assert.equal(put.status, 200);
    const profile = await t.ok<{ profilePicture: string }>('UserProfileRpc.updateProfilePicture', { uploadKey: picture.uploadKey }, { token: owner.token });
    await t.ok('CheckpointRpc.writeFile', { scope: 'finding', path: 'a.md', content: 'a\n' }, { token: owner.token });
    await t.ok('CheckpointRpc.createCheckpoint', { scope: 'finding', message: 'First' }, { token: owner.token });
    const home = mkdtempSync(join(tmpdir(), 'doors-git-'));
    const clone = (key: string) =>
      promisify(execFile)(
        'git',
        ['-c', `http.extraHeader=X-Api-Key: ${key}`, 'clone', '-q', '--bare', `${t.url}/checkpoints/finding.git`, mkdtempSync(join(home, 'clone-'))],
        {
          env: { ...process.env, GIT_CONFIG_NOSYSTEM: '1', HOME: home, GIT_TERMINAL_PROMPT: '0' },
        },
      ).then(
        () => 'cloned',
        (error: Error) => (/403/.test(error.message) ? 'refused (403)' : error.message),
      );
    const file = `/api/files/${profile.profilePicture.split('/').pop()}`;
    // Every door answered for each key, so a failure shows all that let the key through.
    const doors = async (key: string) => ({
      'GET /notes/export': (await fetch(`${t.url}/notes/export`, { headers: { 'x-api-key': key } })).status,
      'GET /api/files/<id>': (await fetch(`${t.url}${file}`, { headers: { 'x-api-key': key } })).status,
      'git clone': await clone(key),
    });
    try {
      assert.deepEqual(await doors(unlimited), { 'GET /notes/export': 200, 'GET /api/files/<id>': 200, 'git clone': 'cloned' });
      assert.deepEqual(await doors(scoped), { 'GET /notes/export': 403, 'GET /api/files/<id>': 403, 'git clone': 'refused (403)' });
    } finally {
      rmSync(home, { recursive: true, force: true });
    }
  });

  it('keeps a rate-limited key from lifting its own limit or making a key without one', async () => {
    // Two keys: one lifting its own limit would otherwise make the other attempt with no limit.
    const [lifter, maker] = [await keyWith({ rateLimitPerMinute: 50 }), await keyWith({ rateLimitPerMinute: 50 })];
    const stored = async () =>
      (await t.ok<{ data: { _id: string; rateLimitPerMinute: number | null }[] }>('ApiKeyRpc.getData', {}, { token: owner.token })).data;
    const before = await stored();
    assert.deepEqual(
      {
        lift: (await t.call('ApiKeyRpc.update', { _id: lifter._id, rateLimitPerMinute: null }, { apiKey: lifter.fullKey })).status,
        make: (await t.call('ApiKeyRpc.create', { description: 'no limit' }, { apiKey: maker.fullKey })).status,
      },
      { lift: 403, make: 403 },
    );
    assert.deepEqual(await stored(), before, 'no key lifted or made');
  });

  it('keeps a key allowed ApiKeyRpc.update from widening its own scopes', async () => {
    const key = await keyWith({ scopes: ['ApiKeyRpc.update'] });
    assert.equal((await t.call('ApiKeyRpc.update', { _id: key._id, scopes: null }, { apiKey: key.fullKey })).status, 403);
    assert.equal((await t.call('ApiKeyRpc.update', { _id: key._id, scopes: ['ApiKeyRpc', 'SecretsRpc'] }, { apiKey: key.fullKey })).status, 403);
    const keys = (await t.ok<{ data: { _id: string; scopes: string[] | null }[] }>('ApiKeyRpc.getData', {}, { token: owner.token })).data;
    assert.deepEqual(keys.find((stored) => stored._id === key._id)!.scopes, ['ApiKeyRpc.update']);
  });
});

describe('a route that does not declare what it serves and its kind', () => {
  const DEPS = ['http'] as const;
  /** A plugin whose one route declares only `declared` (as a plugin in JavaScript, or one cast past the types, could). */
  const withRoute = (declared: Record<string, unknown>) =>
    definePlugin<Deps<typeof DEPS>>({
      id: 'undeclared-route',
      group: 'UndeclaredRouteRpc',
      coreVersion: '^2.0.0',
      deps: DEPS,
      operations: {},
      routes(router, { http }) {
        router.get(
          '/undeclared',
          http.route(declared as never, () => undefined),
        );
      },
    });

  it('stops the start, public routes included: nothing is assumed for any route', async () => {
    const start = (declared: Record<string, unknown>) => startTestApp({ plugins: ['auth', 'undeclared-route'], extraPlugins: [withRoute(declared)] });
    await assert.rejects(start({ access: 'public' }), /Route GET \/undeclared must declare its kind/);
    await assert.rejects(start({ access: 'public', kind: 'read' }), /Route GET \/undeclared must declare what it serves/);
    await assert.rejects(start({ access: 'user', serves: ['notAnOperation'], kind: 'read' }), /must declare what it serves/);
    // `serves: null` passes every key's scopes: a route acting for someone may not opt out of them.
    for (const access of ['user', 'staff', 'admin']) {
      await assert.rejects(start({ access, serves: null, kind: 'read' }), /Route GET \/undeclared serves null .* but is not public/);
    }
    const app = await start({ access: 'public', serves: null, kind: 'read' });
    await app.close();
  });
});
