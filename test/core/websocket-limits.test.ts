import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { connect as connectTcp, type Socket } from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import WebSocket from 'ws';
import { loadConfig } from '../../core/base/config.ts';
import { createScratchDatabase, databaseEnv, type ScratchDatabase, TEST_DATABASE_URL } from '../support/database.ts';
import { startTestApp, TEST_MASTER_KEY, type TestApp } from '../support/harness.ts';
import { freePort, killLeftoverProcesses, runInProject, START_ARGS, whenHealthy } from '../support/process.ts';
import { dataOf, type Envelope, type WsMessage } from '../support/wire.ts';
import type { AuthRpcSignupResult } from '../../clients/typescript/src/operations.ts';

/**
 * Caps on open WebSockets (per user, per client address, in all), set small
 * through the environment, and sockets that never finish their upgrade.
 */

const PER_USER = 2;
const PER_ADDRESS = 3;
const TOTAL = 5;
const HEARTBEAT_SECONDS = 20;
/** How long an upgrade, a freed slot or a close may take to come: it ends when it comes, so it is long (docs/decisions/0060-tests-and-the-clock.md). */
const WAIT_MS = 15_000;

type Attempt = { opened: true; ws: WebSocket } | { opened: false; status: number; retryAfter?: string; body: Envelope | undefined };

/** Every socket a test opened, so `after` can end the ones a failing test left open. */
const sockets = new Set<WebSocket>();

describe('WebSocket limits', () => {
  let t: TestApp;
  let wsUrl: string;

  before(async () => {
    t = await startTestApp({
      withNotes: false,
      plugins: ['auth', 'api-key'],
      env: {
        WS_MAX_PER_USER: String(PER_USER),
        WS_MAX_PER_ADDRESS: String(PER_ADDRESS),
        WS_MAX_CONNECTIONS: String(TOTAL),
        WS_HEARTBEAT_SECONDS: String(HEARTBEAT_SECONDS),
        // Addresses come from X-Forwarded-For, so one test client can stand for several.
        TRUST_PROXY: 'true',
      },
    });
    wsUrl = `${t.url.replace(/^http/, 'ws')}/ws`;
  });
  after(async () => {
    for (const ws of sockets) ws.terminate();
    await t?.close();
  });

  /** Opens /ws as `credential` from `address`: the open socket once `ready` arrives, or the refusal with its status, Retry-After and body. */
  function attempt(credential: { token?: string; apiKey?: string }, address: string): Promise<Attempt> {
    const headers: Record<string, string> = { 'x-forwarded-for': address };
    if (credential.token) headers.authorization = `Bearer ${credential.token}`;
    if (credential.apiKey) headers['x-api-key'] = credential.apiKey;
    const ws = new WebSocket(wsUrl, { headers });
    sockets.add(ws);
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error(`no answer to the upgrade within ${WAIT_MS} ms`)), WAIT_MS);
      ws.on('error', (error) => reject(error));
      ws.once('message', (data) => {
        clearTimeout(timer);
        assert.equal((JSON.parse(data.toString()) as WsMessage).type, 'ready');
        resolve({ opened: true, ws });
      });
      ws.once('unexpected-response', (request, response) => {
        sockets.delete(ws);
        let text = '';
        response.on('data', (chunk) => (text += chunk));
        response.on('end', () => {
          clearTimeout(timer);
          request.destroy();
          resolve({
            opened: false,
            status: response.statusCode!,
            retryAfter: response.headers['retry-after'],
            body: text ? (JSON.parse(text) as Envelope) : undefined,
          });
        });
      });
    });
  }

  async function open(credential: { token?: string; apiKey?: string }, address: string): Promise<WebSocket> {
    const result = await attempt(credential, address);
    assert.ok(result.opened, `the socket was refused: ${JSON.stringify(result)}`);
    return result.ws;
  }

  function assertRefused(result: Attempt, message: RegExp): void {
    assert.ok(!result.opened, 'the socket opened, but should have been refused');
    assert.equal(result.status, 429);
    assert.equal(result.retryAfter, String(HEARTBEAT_SECONDS));
    assert.ok(result.body?.success === false, JSON.stringify(result.body));
    assert.equal(result.body.data.code, 'RATE_LIMITED');
    assert.match(result.body.data.error, message);
  }

  /** Closes sockets and waits until the server has let go of them too. */
  async function closeAll(...list: WebSocket[]): Promise<void> {
    await Promise.all(
      list.map((ws) => {
        sockets.delete(ws);
        if (ws.readyState === WebSocket.CLOSED) return undefined;
        return new Promise<void>((resolve) => {
          ws.once('close', () => resolve());
          ws.close();
        });
      }),
    );
  }

  /** Retries until a socket opens: the server frees a slot when it sees the close, a moment after the client does. */
  async function openOnceFreed(credential: { token?: string; apiKey?: string }, address: string): Promise<WebSocket> {
    const deadline = Date.now() + WAIT_MS;
    for (;;) {
      const result = await attempt(credential, address);
      if (result.opened) return result.ws;
      assert.ok(Date.now() < deadline, `the slot was not freed: ${JSON.stringify(result)}`);
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
  }

  it(`refuses the socket of one user past ${PER_USER} (sessions and API keys together) with 429, lets another user in, and frees the slot on close`, async () => {
    const ann = await t.signup();
    const bob = await t.signup();
    const { fullKey } = await t.ok('ApiKeyRpc.create', { description: 'websocket' }, { token: ann.token });
    // Each from an address of its own: only the per-user cap is in play.
    const first = await open({ apiKey: fullKey }, '10.1.0.1');
    const second = await open({ token: ann.token }, '10.1.0.2');
    assertRefused(await attempt({ apiKey: fullKey }, '10.1.0.3'), /Too many WebSockets for this user \(at most 2\)/);
    assertRefused(await attempt({ token: ann.token }, '10.1.0.4'), /for this user/);
    const bobs = await open({ token: bob.token }, '10.1.0.5');

    await closeAll(first);
    const third = await openOnceFreed({ apiKey: fullKey }, '10.1.0.6');
    assertRefused(await attempt({ apiKey: fullKey }, '10.1.0.7'), /for this user/);
    await closeAll(second, third, bobs);
  });

  it(`refuses the socket of one address past ${PER_ADDRESS} with 429, whoever it is; other addresses still connect`, async () => {
    const users = [await t.signup(), await t.signup(), await t.signup(), await t.signup()];
    const held = [];
    for (const user of users.slice(0, PER_ADDRESS)) held.push(await open({ token: user.token }, '10.2.0.1'));
    assertRefused(await attempt({ token: users[3]!.token }, '10.2.0.1'), /Too many WebSockets from this address \(at most 3\)/);
    held.push(await open({ token: users[3]!.token }, '10.2.0.2'));

    await closeAll(held[0]!);
    held[0] = await openOnceFreed({ token: users[3]!.token }, '10.2.0.1');
    await closeAll(...held);
  });

  it(`refuses any socket past ${TOTAL} in all with 429, while RPC calls go on answering`, async () => {
    const users = await Promise.all(Array.from({ length: TOTAL + 1 }, () => t.signup()));
    const held = [];
    for (const [index, user] of users.slice(0, TOTAL).entries()) held.push(await open({ token: user.token }, `10.3.0.${index + 1}`));
    const newcomer = users[TOTAL]!;
    assertRefused(await attempt({ token: newcomer.token }, '10.3.1.1'), /The server holds as many WebSockets as it may/);

    const calls = await Promise.all(users.map((user) => t.call('AuthRpc.getSession', {}, { token: user.token })));
    assert.deepEqual(
      calls.map((call) => call.status),
      users.map(() => 200),
    );
    await t.signup(); // the database still takes writes

    await closeAll(held.pop()!);
    held.push(await openOnceFreed({ token: newcomer.token }, '10.3.1.1'));
    await closeAll(...held);
  });

  it('counts refusals by reason in /metrics', async () => {
    assert.equal((await attempt({ token: 'not-a-session' }, '10.4.0.1')).opened, false);
    const text = await (await fetch(`${t.url}/metrics`)).text();
    for (const reason of ['unauthenticated', 'user_limit', 'address_limit', 'total_limit']) {
      const line = text.split('\n').find((row) => row.startsWith('websocket_connections_total{') && row.includes(`reason="${reason}"`));
      assert.ok(line && Number(line.split(' ').pop()) >= 1, `a refusal counted for ${reason}:\n${text}`);
    }
    assert.match(text, /^websocket_connections_open 0$/m);
  });

  /** Connections the server holds open (sockets, upgraded or not). */
  const serverConnections = () =>
    new Promise<number>((resolve, reject) => t.app.server.getConnections((error, count) => (error ? reject(error) : resolve(count))));

  async function until(what: string, check: () => Promise<boolean>): Promise<void> {
    const deadline = Date.now() + WAIT_MS;
    while (!(await check())) {
      assert.ok(Date.now() < deadline, `timed out waiting until ${what}`);
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
  }

  it('lets go of a refused upgrade even when the client never closes its side', async () => {
    const before = await serverConnections();
    // allowHalfOpen: the client keeps its side open after the server's answer, as a careless or hostile one would.
    const socket = connectTcp({ port: Number(new URL(t.url).port), host: '127.0.0.1', allowHalfOpen: true });
    let answer = '';
    socket.on('data', (chunk) => (answer += chunk));
    socket.on('error', () => undefined);
    try {
      socket.write(
        'GET /ws HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n\r\n',
      );
      await until('the 401 arrives', async () => answer.startsWith('HTTP/1.1 401'));
      await until('the server holds no more connections than before', async () => (await serverConnections()) <= before);
    } finally {
      socket.destroy();
    }
  });

  it('closes a connection that sends nothing once the time for a request head is up', async () => {
    const headersTimeout = t.app.server.headersTimeout;
    t.app.server.headersTimeout = 300;
    try {
      const silent: Socket = connectTcp(Number(new URL(t.url).port), '127.0.0.1');
      silent.on('error', () => undefined);
      const closed = await new Promise<boolean>((resolve) => {
        const timer = setTimeout(() => resolve(false), WAIT_MS);
        silent.once('close', () => {
          clearTimeout(timer);
          resolve(true);
        });
      });
      silent.destroy();
      assert.ok(closed, 'the server still holds a connection that never sent a byte');
    } finally {
      t.app.server.headersTimeout = headersTimeout;
    }
  });
});

describe('the default total, from the open-file limit', () => {
  const OPEN_FILES = 320;
  let dataDir: string;
  let scratch: ScratchDatabase | undefined;
  const held: WebSocket[] = [];
  after(async () => {
    for (const ws of held) ws.terminate();
    killLeftoverProcesses();
    await scratch?.drop();
    if (dataDir) rmSync(dataDir, { recursive: true, force: true });
  });

  it('refuses to start with a WS_MAX_CONNECTIONS that leaves fewer than 256 descriptors', () => {
    assert.throws(() => loadConfig({ WS_MAX_CONNECTIONS: '10000000' }), /^ConfigError: WS_MAX_CONNECTIONS 10000000 leaves fewer than 256 of the \d+ files/);
  });

  it(`under ulimit -n ${OPEN_FILES}, takes ${OPEN_FILES / 2} WebSockets, refuses the next with 429, and RPC calls and the database go on`, async () => {
    dataDir = mkdtempSync(path.join(tmpdir(), 'ws-open-files-'));
    if (TEST_DATABASE_URL) scratch = await createScratchDatabase(TEST_DATABASE_URL);
    const port = await freePort();
    const base = `http://127.0.0.1:${port}`;
    // The shell sets the soft and the hard limit, so node cannot raise it; only the per-user and per-address caps are lifted.
    const server = runInProject('/bin/sh', ['-c', `ulimit -n ${OPEN_FILES} && exec "$0" "$@"`, process.execPath, ...START_ARGS], {
      PORT: String(port),
      HOST: '127.0.0.1',
      DATA_DIR: dataDir,
      LOG_LEVEL: 'warn',
      WORKERS: '1',
      WS_MAX_PER_USER: '100000',
      WS_MAX_PER_ADDRESS: '100000',
      ...(scratch ? { ...databaseEnv(scratch.url), MASTER_KEY: TEST_MASTER_KEY } : {}),
    });
    await whenHealthy(server, base, 60_000);
    const rpc = async <T = unknown>(method: string, params: unknown, token?: string) => {
      const response = await fetch(`${base}/api/rpc`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', ...(token ? { authorization: `Bearer ${token}` } : {}) },
        body: JSON.stringify({ method, params }),
      });
      return { status: response.status, body: (await response.json()) as Envelope<T> };
    };
    const signup = (name: string) =>
      rpc<AuthRpcSignupResult>('AuthRpc.signup', { email: `${name}@example.com`, username: name, password: 'correct horse battery' });
    const { token } = dataOf((await signup('socketeer')).body);

    // Opens sockets until one is refused (or something else goes wrong, which fails the test).
    let refusal: { status: number; retryAfter?: string } | undefined;
    while (!refusal && held.length <= OPEN_FILES) {
      const ws = new WebSocket(`ws://127.0.0.1:${port}/ws`, { headers: { authorization: `Bearer ${token}` } });
      refusal = await new Promise((resolve, reject) => {
        ws.once('message', () => {
          held.push(ws);
          resolve(undefined);
        });
        ws.once('unexpected-response', (request, response) => {
          request.destroy();
          resolve({ status: response.statusCode!, retryAfter: response.headers['retry-after'] });
        });
        ws.once('error', (error) => reject(new Error(`socket ${held.length + 1} failed: ${error.message}\n${server.stderr()}`)));
      });
    }
    assert.deepEqual(refusal, { status: 429, retryAfter: '30' });
    assert.equal(held.length, OPEN_FILES / 2);

    const sessions = await Promise.all(Array.from({ length: 20 }, () => rpc('AuthRpc.getSession', {}, token)));
    assert.deepEqual(
      sessions.map((call) => call.status),
      sessions.map(() => 200),
    );
    assert.equal((await signup('latecomer')).status, 200, 'the database still takes writes');
    assert.equal((await fetch(`${base}/ready`)).status, 200);
  });
});
