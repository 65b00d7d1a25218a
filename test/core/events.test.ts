import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import WebSocket from 'ws';
import { definePlugin, wireTimestamp } from 'rpc-service/plugin';
import * as v from 'valibot';
import { BUS_RESYNC } from '../../core/events/bus.ts';
import { createScratchDatabase, TEST_DATABASE_URL, type ScratchDatabase } from '../support/database.ts';
import { startTestApp, type TestApp } from '../support/harness.ts';
import { addUser } from '../support/users.ts';
import type { WsMessage } from '../support/wire.ts';

type Signup = Awaited<ReturnType<TestApp['signup']>>;

interface ConnectOptions {
  path?: string;
  query?: Record<string, string>;
  headers?: Record<string, string>;
}

interface CloseInfo {
  code: number;
  reason: string;
}

/** Every client socket a test opened, so `after` can end the ones a failing test left open. */
const openSockets = new Set<WebSocket>();

function wsUrl(t: TestApp, { path = '/ws', query = {} }: ConnectOptions = {}): string {
  const url = new URL(path, t.url.replace(/^http/, 'ws'));
  for (const [name, value] of Object.entries(query)) url.searchParams.set(name, value);
  return url.toString();
}

/** Rejects with a clear message unless `promise` settles within `ms`. */
/**
 * How long a message or a close that is coming is waited for: a wait ends as soon as it comes, so only a failing
 * test pays for it, and a loaded 2-core machine's slow answer does not fail a passing one.
 */
const WAIT_MS = 15_000;

function within<T>(promise: Promise<T>, ms: number, what: string): Promise<T> {
  let timer: NodeJS.Timeout;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`timed out after ${ms} ms waiting for ${what}`)), ms);
  });
  return Promise.race([promise, timeout]).finally(() => clearTimeout(timer));
}

/** A client socket whose messages are queued from the start, so none is lost between awaits. */
class TestSocket {
  readonly ws: WebSocket;
  readonly #queue: WsMessage[] = [];
  readonly #waiters: ((message: WsMessage) => void)[] = [];
  readonly #closed: Promise<CloseInfo>;
  ready: Extract<WsMessage, { type: 'ready' }> | undefined;

  constructor(ws: WebSocket) {
    this.ws = ws;
    ws.on('error', () => undefined); // failures surface as timeouts or close codes
    ws.on('message', (data) => {
      const message = JSON.parse(data.toString()) as WsMessage;
      // The notes plugin's background count follows each note at its own pace; these tests follow the requests' events.
      if (message.type === 'event' && message.event === 'notes.tallied') return;
      const waiter = this.#waiters.shift();
      if (waiter) waiter(message);
      else this.#queue.push(message);
    });
    this.#closed = new Promise((resolve) => {
      ws.once('close', (code, reason) => {
        openSockets.delete(ws);
        resolve({ code, reason: reason.toString() });
      });
    });
  }

  /** The next message from the server, parsed; rejects after timeoutMs. */
  next(timeoutMs = WAIT_MS): Promise<WsMessage> {
    if (this.#queue.length > 0) return Promise.resolve(this.#queue.shift()!);
    let waiter!: (message: WsMessage) => void;
    const arrived = new Promise<WsMessage>((resolve) => {
      waiter = resolve;
      this.#waiters.push(waiter);
    });
    return within(arrived, timeoutMs, 'a WebSocket message').catch((error) => {
      const index = this.#waiters.indexOf(waiter);
      if (index !== -1) this.#waiters.splice(index, 1);
      throw error;
    });
  }

  /** Messages received and not yet taken with next(). */
  get pending(): readonly WsMessage[] {
    return this.#queue;
  }

  /**
   * Sends an application ping and insists the very next message is the pong:
   * whatever the server meant to send this client before handling the ping has arrived by then.
   */
  async barrier(timeoutMs = WAIT_MS): Promise<void> {
    this.ws.send('{"type":"ping"}');
    assert.deepEqual(await this.next(timeoutMs), { type: 'pong' });
  }

  closed(timeoutMs = WAIT_MS): Promise<CloseInfo> {
    return within(this.#closed, timeoutMs, 'the WebSocket to close');
  }

  get isOpen(): boolean {
    return this.ws.readyState === WebSocket.OPEN;
  }
}

/** Opens /ws and waits for the `ready` message; rejects when the upgrade is refused. */
async function connect(t: TestApp, options: ConnectOptions = {}): Promise<TestSocket> {
  const ws = new WebSocket(wsUrl(t, options), { headers: options.headers });
  openSockets.add(ws);
  const socket = new TestSocket(ws);
  await within(
    new Promise<void>((resolve, reject) => {
      ws.once('open', () => resolve());
      ws.once('unexpected-response', (request, response) => {
        request.destroy();
        reject(new Error(`upgrade refused with HTTP ${response.statusCode}`));
      });
      ws.once('error', reject);
    }),
    WAIT_MS,
    'the WebSocket to open',
  );
  const ready = await socket.next();
  assert.ok(ready.type === 'ready', JSON.stringify(ready));
  socket.ready = ready;
  return socket;
}

/** The HTTP status an upgrade is refused with; rejects if the socket opens. */
function refusedStatus(t: TestApp, options: ConnectOptions = {}): Promise<number> {
  const ws = new WebSocket(wsUrl(t, options), { headers: options.headers });
  openSockets.add(ws);
  ws.on('error', () => undefined);
  return within(
    new Promise<number>((resolve, reject) => {
      ws.once('unexpected-response', (request, response) => {
        openSockets.delete(ws);
        resolve(response.statusCode ?? 0);
        request.destroy();
      });
      ws.once('open', () => reject(new Error('the WebSocket opened, but should have been refused')));
    }),
    WAIT_MS,
    'the upgrade to be refused',
  );
}

function closeAllSockets(): void {
  for (const ws of openSockets) ws.terminate();
  openSockets.clear();
}

function assertEventMessage(message: WsMessage, name: string, payload: unknown): void {
  assert.ok(message.type === 'event', JSON.stringify(message));
  assert.equal(message.event, name);
  assert.deepEqual(message.payload, payload);
  assert.deepEqual(Object.keys(message).sort(), ['at', 'event', 'payload', 'type']);
  const at = Date.parse(message.at);
  assert.ok(!Number.isNaN(at) && Math.abs(Date.now() - at) < 60_000, `bad "at": ${message.at}`);
}

/** A second user in an existing subscription (the service has no invitation operation yet). */
async function addMember(t: TestApp, subscriptionId: string): Promise<{ userId: string; token: string }> {
  const member = await addUser(t, subscriptionId, 'user');
  return { userId: member.user._id, token: member.token };
}

/** Declares the events these tests publish straight on the bus: an event for clients must be in the catalogue. */
const catalogue = definePlugin({
  id: 'event-probe',
  group: 'EventProbeRpc',
  coreVersion: '^2.0.0',
  operations: {},
  extends: {
    'core.events': [
      { name: 'direct.message', describe: 'A message to some users of a subscription.' },
      { name: 'big.event', describe: 'An event too large for a NOTIFY payload.' },
      { name: 'stamped.event', describe: 'An event with a declared payload: {at}.', payload: v.strictObject({ at: wireTimestamp }) },
    ],
  },
});

describe('WebSocket /ws', () => {
  let t: TestApp;
  let owner: Signup;
  let other: Signup;
  let ownerKey: { _id: string; fullKey: string };

  before(async () => {
    t = await startTestApp({ extraPlugins: [catalogue] });
    owner = await t.signup();
    other = await t.signup();
    ownerKey = await t.as(owner).ApiKeyRpc.create({ description: 'websocket' });
  });
  after(async () => {
    closeAllSockets();
    await t?.close();
  });

  describe('authentication', () => {
    const expectReady = (socket: TestSocket) => {
      assert.deepEqual(socket.ready, { type: 'ready', userId: owner.user._id, subscriptionId: owner.subscriptionId });
      assert.deepEqual(socket.pending, []);
    };

    it('accepts a session token as Authorization: Bearer', async () => {
      const socket = await connect(t, { headers: { authorization: `Bearer ${owner.token}` } });
      expectReady(socket);
      socket.ws.close();
    });

    it('accepts an API key as X-API-Key', async () => {
      const socket = await connect(t, { headers: { 'x-api-key': ownerKey.fullKey } });
      expectReady(socket);
      socket.ws.close();
    });

    it('accepts a session token as ?token=', async () => {
      const socket = await connect(t, { query: { token: owner.token } });
      expectReady(socket);
      socket.ws.close();
    });

    it('accepts an API key as ?apiKey=', async () => {
      const socket = await connect(t, { query: { apiKey: ownerKey.fullKey } });
      expectReady(socket);
      socket.ws.close();
    });

    it('accepts the session cookie', async () => {
      const socket = await connect(t, { headers: { cookie: `theme=dark; session=${encodeURIComponent(owner.token)}` } });
      expectReady(socket);
      socket.ws.close();
    });

    it('identifies each caller as itself', async () => {
      const socket = await connect(t, { query: { token: other.token } });
      assert.deepEqual(socket.ready, { type: 'ready', userId: other.user._id, subscriptionId: other.subscriptionId });
      assert.notEqual(other.subscriptionId, owner.subscriptionId);
      socket.ws.close();
    });

    it('refuses an upgrade without a credential with 401', async () => {
      assert.equal(await refusedStatus(t), 401);
    });

    it('refuses bad credentials with 401', async () => {
      const forgedKey = `${ownerKey.fullKey.split('_')[0]}_${'A'.repeat(43)}`;
      const attempts: ConnectOptions[] = [
        { headers: { authorization: 'Bearer not-a-session' } },
        { headers: { 'x-api-key': forgedKey } },
        { headers: { 'x-api-key': 'nonsense' } },
        { headers: { cookie: 'session=not-a-session' } },
        { query: { token: 'not-a-session' } },
        { query: { apiKey: forgedKey } },
      ];
      for (const options of attempts) {
        assert.equal(await refusedStatus(t, options), 401, JSON.stringify(options));
      }
    });

    it('answers 404 for a path other than /ws, even with a valid credential', async () => {
      for (const path of ['/', '/websocket', '/ws/extra', '/api/rpc']) {
        assert.equal(await refusedStatus(t, { path, query: { token: owner.token } }), 404, path);
      }
    });
  });

  it('answers {"type":"ping"} with {"type":"pong"}', async () => {
    const socket = await connect(t, { query: { token: owner.token } });
    socket.ws.send('{"type":"ping"}');
    assert.deepEqual(await socket.next(), { type: 'pong' });
    socket.ws.send('{"type":"ping"}');
    assert.deepEqual(await socket.next(), { type: 'pong' });
    socket.ws.close();
  });

  it("delivers a subscription's events to all of its clients and to no other subscription", async () => {
    const byBearer = await connect(t, { headers: { authorization: `Bearer ${owner.token}` } });
    const byKey = await connect(t, { headers: { 'x-api-key': ownerKey.fullKey } });
    const outsider = await connect(t, { query: { token: other.token } });
    try {
      const note = await t.ok('NoteRpc.add', { text: 'hello over the socket' }, { token: owner.token });
      assert.equal(note.text, 'hello over the socket');
      assertEventMessage(await byBearer.next(), 'note.added', note);
      assertEventMessage(await byKey.next(), 'note.added', note);

      // The outsider's own next event must be its own note: the owner's, published earlier, never came.
      const theirs = await t.ok('NoteRpc.add', { text: 'another tenant' }, { token: other.token });
      assertEventMessage(await outsider.next(), 'note.added', theirs);
      // And the owner's clients do not hear the outsider's note.
      await byBearer.barrier();
      await byKey.barrier();
      assert.deepEqual(outsider.pending, []);
    } finally {
      for (const socket of [byBearer, byKey, outsider]) socket.ws.close();
    }
  });

  it('delivers events with userIds only to those users of the subscription', async () => {
    const member = await addMember(t, owner.subscriptionId);
    const ownerSocket = await connect(t, { query: { token: owner.token } });
    const memberSocket = await connect(t, { query: { token: member.token } });
    const outsider = await connect(t, { query: { token: other.token } });
    try {
      assert.equal(memberSocket.ready?.subscriptionId, owner.subscriptionId);
      assert.equal(memberSocket.ready?.userId, member.userId);
      const bus = t.app.deps.bus;
      const subscriptionId = owner.subscriptionId;

      await bus.publish({ name: 'direct.message', payload: { n: 1 }, subscriptionId, userIds: [member.userId] });
      assertEventMessage(await memberSocket.next(), 'direct.message', { n: 1 });

      await bus.publish({ name: 'direct.message', payload: { n: 2 }, subscriptionId, userIds: [owner.user._id] });
      // n: 1 was for the member only, so the owner's first event is n: 2.
      assertEventMessage(await ownerSocket.next(), 'direct.message', { n: 2 });
      await memberSocket.barrier();

      await bus.publish({ name: 'direct.message', payload: { n: 3 }, subscriptionId, userIds: [owner.user._id, member.userId] });
      assertEventMessage(await ownerSocket.next(), 'direct.message', { n: 3 });
      assertEventMessage(await memberSocket.next(), 'direct.message', { n: 3 });

      // A user id of another subscription does not carry an event across tenants.
      await bus.publish({ name: 'direct.message', payload: { n: 4 }, subscriptionId, userIds: [other.user._id] });
      // An event without a subscription stays inside the service.
      await bus.publish({ name: 'internal.only', payload: { n: 5 } });
      await bus.publish({ name: 'internal.only', payload: { n: 6 }, userIds: [owner.user._id] });
      // An event for clients that is not in the catalogue is refused before it reaches anyone.
      await assert.rejects(bus.publish({ name: 'undeclared.event', payload: { n: 7 }, subscriptionId }), /not in the event catalogue/);
      for (const socket of [ownerSocket, memberSocket, outsider]) await socket.barrier();
      for (const socket of [ownerSocket, memberSocket, outsider]) assert.deepEqual(socket.pending, []);
    } finally {
      for (const socket of [ownerSocket, memberSocket, outsider]) socket.ws.close();
    }
  });

  it('refuses, with CHECK_RESULTS on, an event whose payload is outside its declared schema, judged as clients receive it', async () => {
    const bus = t.app.deps.bus;
    const subscriptionId = owner.subscriptionId;
    // A date becomes ISO text on the way to clients, which is what the schema says.
    await bus.publish({ name: 'stamped.event', payload: { at: new Date() }, subscriptionId });
    await assert.rejects(
      bus.publish({ name: 'stamped.event', payload: { at: 'yesterday', extra: 1 }, subscriptionId }),
      /Event "stamped\.event" was published outside its declared payload: at: Invalid timestamp: .*; extra: Invalid key/,
    );
  });

  describe('revocation', () => {
    it('AuthRpc.logout closes the sockets of that session at once, and only those', async () => {
      const user = await t.signup();
      const second = await t.as(null).AuthRpc.login({ identifier: user.user.username, password: user.password });
      assert.notEqual(second.token, user.token);
      const loggingOut = await connect(t, { headers: { authorization: `Bearer ${user.token}` } });
      const viaCookie = await connect(t, { headers: { cookie: `session=${user.token}` } });
      const otherSession = await connect(t, { query: { token: second.token } });
      try {
        assert.deepEqual(await t.as(user).AuthRpc.logout(), { success: true });
        assert.equal((await loggingOut.closed()).code, 4001);
        assert.equal((await viaCookie.closed()).code, 4001);
        await otherSession.barrier();
        assert.ok(otherSession.isOpen);
        assert.equal(await refusedStatus(t, { query: { token: user.token } }), 401);
      } finally {
        for (const socket of [loggingOut, viaCookie, otherSession]) socket.ws.close();
      }
    });

    it('ApiKeyRpc.delete closes the sockets of that key at once', async () => {
      const doomed = await t.as(owner).ApiKeyRpc.create({ description: 'doomed' });
      const byHeader = await connect(t, { headers: { 'x-api-key': doomed.fullKey } });
      const byQuery = await connect(t, { query: { apiKey: doomed.fullKey } });
      const session = await connect(t, { query: { token: owner.token } });
      try {
        assert.deepEqual(await t.as(owner).ApiKeyRpc.delete({ _id: doomed._id }), { success: true });
        const closed = await byHeader.closed();
        assert.equal(closed.code, 4001);
        assert.equal(closed.reason, 'credential revoked');
        assert.equal((await byQuery.closed()).code, 4001);
        // The same user's session socket is not affected.
        await session.barrier();
        assert.ok(session.isOpen);
        assert.equal(await refusedStatus(t, { headers: { 'x-api-key': doomed.fullKey } }), 401);
      } finally {
        for (const socket of [byHeader, byQuery, session]) socket.ws.close();
      }
    });

    it('disabling an API key closes its sockets at once', async () => {
      const key = await t.as(owner).ApiKeyRpc.create({ description: 'to disable' });
      const keep = await connect(t, { headers: { 'x-api-key': ownerKey.fullKey } });
      const socket = await connect(t, { headers: { 'x-api-key': key.fullKey } });
      try {
        await t.as(owner).ApiKeyRpc.update({ _id: key._id, isEnabled: false });
        assert.equal((await socket.closed()).code, 4001);
        await keep.barrier();
        assert.ok(keep.isOpen);
        assert.equal(await refusedStatus(t, { query: { apiKey: key.fullKey } }), 401);
      } finally {
        socket.ws.close();
        keep.ws.close();
      }
    });

    it('editing a key without revoking it keeps its sockets open', async () => {
      const key = await t.as(owner).ApiKeyRpc.create({ description: 'to edit' });
      const socket = await connect(t, { headers: { 'x-api-key': key.fullKey } });
      try {
        await t.as(owner).ApiKeyRpc.update({ _id: key._id, description: 'edited', initialContext: '{"projectId":"p"}' });
        // The change is re-checked asynchronously; give it time to (wrongly) close the socket.
        await new Promise((resolve) => setTimeout(resolve, 200));
        await socket.barrier();
        assert.ok(socket.isOpen);
        await t.ok('NoteRpc.add', { text: 'still listening' }, { apiKey: key.fullKey });
        const message = await socket.next();
        assert.ok(message.type === 'event', JSON.stringify(message));
        assert.equal(message.event, 'note.added');
        assert.equal((message.payload as { text: string }).text, 'still listening');
      } finally {
        socket.ws.close();
      }
    });

    it('a malformed session cookie is refused with 401, not an error', async () => {
      assert.equal(await refusedStatus(t, { headers: { cookie: 'session=%E0%A4%A' } }), 401);
      const rpc = await t.call('AuthRpc.getSession', {}, { headers: { cookie: 'session=%E0%A4%A' } });
      assert.equal(rpc.status, 401);
      assert.equal(rpc.body.data.code, 'UNAUTHENTICATED');
    });
  });
});

describe('event fan-out between two instances on one PostgreSQL', { skip: TEST_DATABASE_URL ? false : 'needs TEST_DATABASE_URL' }, () => {
  let scratch: ScratchDatabase;
  let a: TestApp;
  let b: TestApp;
  let owner: Signup;

  before(async () => {
    scratch = await createScratchDatabase(TEST_DATABASE_URL!);
    a = await startTestApp({ databaseUrl: scratch.url, extraPlugins: [catalogue] });
    b = await startTestApp({ databaseUrl: scratch.url, extraPlugins: [catalogue] });
    owner = await a.signup();
  });
  after(async () => {
    closeAllSockets();
    await a?.close();
    await b?.close();
    await scratch?.drop();
  });

  it("delivers a note added on instance A to instance B's client", async () => {
    assert.notEqual(a.app.deps.bus.nodeId, b.app.deps.bus.nodeId);
    const onB = await connect(b, { headers: { authorization: `Bearer ${owner.token}` } });
    const onA = await connect(a, { headers: { authorization: `Bearer ${owner.token}` } });
    try {
      const note = await a.ok('NoteRpc.add', { text: 'from node A' }, { token: owner.token });
      assertEventMessage(await onB.next(), 'note.added', note);
      // Exactly once on each node: A delivers locally and ignores its own notification.
      assertEventMessage(await onA.next(), 'note.added', note);
      await onA.barrier();
      await onB.barrier();
    } finally {
      onA.ws.close();
      onB.ws.close();
    }
  });

  it('B recovers after losing its LISTEN connection: it forgets cached credentials and hears events again', async () => {
    const key = await a.as(owner).ApiKeyRpc.create({ description: 'survives a reconnect' });
    await b.ok('NoteRpc.whoAmI', {}, { apiKey: key.fullKey }); // cached on B
    const onB = await connect(b, { headers: { authorization: `Bearer ${owner.token}` } });
    let resynced = 0;
    const unsubscribe = b.app.deps.bus.subscribe(BUS_RESYNC, () => void (resynced += 1));
    try {
      // Cut every LISTEN connection of the scratch database, as a database restart or a network blip would.
      const dbName = new URL(scratch.url).pathname.slice(1);
      const [cut] = await a.app.deps.db.execute<{ n: number }>(
        `select count(pg_terminate_backend(pid))::int as n from pg_stat_activity where datname = ? and query ilike 'listen %'`,
        [dbName],
      );
      assert.ok(cut!.n >= 2, `terminated ${cut!.n} listeners`);
      // While B is not listening, A deletes the key: B must not keep trusting its cached copy.
      await a.as(owner).ApiKeyRpc.delete({ _id: key._id });
      const deadline = Date.now() + WAIT_MS;
      let delivered: WsMessage | undefined;
      while (!delivered && Date.now() < deadline) {
        await a.ok('NoteRpc.add', { text: 'after the blip' }, { token: owner.token });
        delivered = await onB.next(700).catch(() => undefined);
      }
      assert.ok(delivered, 'B heard events again after reconnecting');
      assert.ok(delivered.type === 'event', JSON.stringify(delivered));
      assert.equal(delivered.event, 'note.added');
      assert.equal(resynced, 1, 'B announced that it may have missed events');
      assert.equal((await b.call('NoteRpc.whoAmI', {}, { apiKey: key.fullKey })).status, 401);
    } finally {
      unsubscribe();
      onB.ws.close();
    }
  });

  it('refuses on B, long before its cache would expire, an API key cached on B and deleted on A, and closes its socket on B', async () => {
    const key = await a.as(owner).ApiKeyRpc.create({ description: 'cross-node' });
    const me = await b.ok('NoteRpc.whoAmI', {}, { apiKey: key.fullKey }); // now cached on B
    assert.equal(me.apiKeyId, key._id);
    const socket = await connect(b, { headers: { 'x-api-key': key.fullKey } });
    try {
      await a.as(owner).ApiKeyRpc.delete({ _id: key._id });
      // The key is cached on B for AUTH_CACHE_TTL_SECONDS (60): refused well before, it was the deletion that reached B.
      const deadline = Date.now() + WAIT_MS;
      let status = 0;
      while (Date.now() < deadline) {
        status = (await b.call('NoteRpc.whoAmI', {}, { apiKey: key.fullKey })).status;
        if (status === 401) break;
        await new Promise((resolve) => setTimeout(resolve, 25));
      }
      assert.equal(status, 401, `B still accepted the deleted key after ${WAIT_MS} ms`);
      assert.equal((await socket.closed()).code, 4001);
    } finally {
      socket.ws.close();
    }
  });

  it('carries an event larger than a NOTIFY payload through core_event_payload', async () => {
    const onB = await connect(b, { query: { token: owner.token } });
    try {
      const payload = { blob: 'é'.repeat(4500) + 'x'.repeat(500), nested: { list: [1, 2, 3] } };
      assert.ok(Buffer.byteLength(JSON.stringify(payload)) > 9000);
      const [before] = await a.app.deps.db.execute<{ count: string | number }>('select count(*) as count from core_event_payload');
      await a.app.deps.bus.publish({ name: 'big.event', payload, subscriptionId: owner.subscriptionId });
      assertEventMessage(await onB.next(), 'big.event', payload);
      const [afterward] = await a.app.deps.db.execute<{ count: string | number }>('select count(*) as count from core_event_payload');
      assert.equal(Number(afterward!.count), Number(before!.count) + 1);
    } finally {
      onB.ws.close();
    }
  });
});
