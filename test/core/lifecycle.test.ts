import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { TEST_DATABASE_URL } from '../support/database.ts';
import { startTestApp, uniqueName, type TestApp } from '../support/harness.ts';
import { freePort, killLeftoverProcesses, runServer } from '../support/process.ts';
import { refused } from '../support/caller.ts';

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/;

const tempDir = (prefix: string) => mkdtempSync(path.join(tmpdir(), prefix));

describe('restart with the embedded database', () => {
  it(
    'keeps users, sessions for login, API keys and plugin data in DATA_DIR',
    { skip: TEST_DATABASE_URL ? 'about the embedded database; TEST_DATABASE_URL is set' : false },
    async () => {
      const dataDir = tempDir('rpc-restart-');
      let t: TestApp | undefined;
      try {
        t = await startTestApp({ persistent: true, dataDir });
        const username = uniqueName('restart');
        const password = `restart ${randomBytes(6).toString('hex')}`;
        const owner = await t.signup(username, password);
        const key = await t.as(owner).ApiKeyRpc.create({ description: 'survives restarts' });
        const note = await t.ok('NoteRpc.add', { text: 'written before the restart' }, { token: owner.token });
        assert.ok(
          t.logs.some((line) => line.includes('generated a new master key')),
          'first start generates the key',
        );
        const masterKeyFile = path.join(dataDir, 'master.key');
        const masterKeyBefore = readFileSync(masterKeyFile, 'utf8');
        assert.ok(existsSync(path.join(dataDir, 'db')), 'the database lives under DATA_DIR');
        await t.close();
        t = undefined;

        t = await startTestApp({ persistent: true, dataDir });
        assert.equal(
          t.logs.some((line) => line.includes('generated a new master key')),
          false,
          'the second start reuses the key',
        );
        assert.equal(readFileSync(masterKeyFile, 'utf8'), masterKeyBefore);
        assert.equal(statSync(masterKeyFile).mode & 0o777, 0o600);

        const login = await t.as(null).AuthRpc.login({ identifier: username, password });
        assert.equal(login.user._id, owner.user._id);
        assert.notEqual(login.token, owner.token);
        await refused(t.as(null).AuthRpc.login({ identifier: username, password: `${password}x` }), 'UNAUTHENTICATED');

        const me = await t.ok('NoteRpc.whoAmI', {}, { apiKey: key.fullKey });
        assert.equal(me.userId, owner.user._id);
        assert.equal(me.subscriptionId, owner.subscriptionId);
        assert.equal(me.apiKeyId, key._id);

        const list = await t.ok('NoteRpc.list', {}, { apiKey: key.fullKey });
        assert.deepEqual(
          list.data.map((n: { _id: string; text: string }) => [n._id, n.text]),
          [[note._id, 'written before the restart']],
        );
        // The old session token was stored too.
        assert.equal((await t.as(owner).AuthRpc.getSession()).user._id, owner.user._id);
        await t.close();
        t = undefined;

        // Without its key file the database's secrets cannot be read: the service refuses to start rather than make a new key.
        rmSync(masterKeyFile);
        await assert.rejects(startTestApp({ persistent: true, dataDir }), /master\.key is missing, yet DATA_DIR holds the embedded database/);
        assert.equal(existsSync(masterKeyFile), false);
      } finally {
        await t?.close();
        rmSync(dataDir, { recursive: true, force: true });
      }
    },
  );
});

describe('health, readiness, metrics and request ids', () => {
  let t: TestApp;
  before(async () => {
    t = await startTestApp();
  });
  after(() => t?.close());

  const get = (pathname: string, headers: Record<string, string> = {}) => fetch(`${t.url}${pathname}`, { headers });
  const post = (body: string, headers: Record<string, string> = {}) =>
    fetch(`${t.url}/api/rpc`, { method: 'POST', headers: { 'content-type': 'application/json', ...headers }, body });

  it('answers /health and /ready', async () => {
    const health = await get('/health');
    assert.equal(health.status, 200);
    assert.deepEqual(await health.json(), { status: 'ok' });
    const ready = await get('/ready');
    assert.equal(ready.status, 200);
    assert.deepEqual(await ready.json(), { status: 'ready' });
  });

  it('serves Prometheus metrics with RPC counters and default process metrics', async () => {
    // Over HTTP: the counters are the endpoint's.
    const name = uniqueName('metrics');
    await t.ok('AuthRpc.signup', { email: `${name}@example.com`, username: name, password: 'correct horse battery' });
    await t.call('No.suchMethod', {});
    const response = await get('/metrics');
    assert.equal(response.status, 200);
    assert.match(response.headers.get('content-type') ?? '', /^text\/plain/);
    const text = await response.text();
    assert.match(text, /^# TYPE rpc_calls_total counter$/m);
    const sample = (method: string, code: string) =>
      text
        .split('\n')
        .filter((line) => line.startsWith('rpc_calls_total{') && line.includes(`method="${method}"`) && line.includes(`code="${code}"`))
        .map((line) => Number(line.slice(line.lastIndexOf(' ') + 1)));
    const signups = sample('AuthRpc.signup', 'OK');
    assert.equal(signups.length, 1, text);
    assert.ok(signups[0]! >= 1, `signup count ${signups[0]}`);
    assert.deepEqual(sample('unknown', 'METHOD_NOT_FOUND'), [1]);
    assert.match(text, /^rpc_call_duration_seconds_count\{method="AuthRpc\.signup"\} [1-9]/m);
    assert.match(text, /^process_cpu_user_seconds_total \d/m);
    assert.match(text, /^process_cpu_seconds_total \d/m);
  });

  it('puts an X-Request-Id on every response', async () => {
    const responses = {
      health: await get('/health'),
      ready: await get('/ready'),
      metrics: await get('/metrics'),
      listing: await get('/api/rpc'),
      unknownPath: await get('/no/such/path'),
      wrongVerb: await fetch(`${t.url}/health`, { method: 'DELETE' }),
      unknownMethod: await post(JSON.stringify({ method: 'Nope.nothing', params: {} })),
      badJson: await post('{not json'),
      unauthenticated: await post(JSON.stringify({ method: 'NoteRpc.list', params: {} })),
      validation: await post(JSON.stringify({ method: 'AuthRpc.login', params: {} })),
      ok: await post(JSON.stringify({ method: 'AuthRpc.getClientConfig', params: {} })),
    };
    const expected: Record<keyof typeof responses, number> = {
      health: 200,
      ready: 200,
      metrics: 200,
      listing: 200,
      unknownPath: 404,
      wrongVerb: 405,
      unknownMethod: 404,
      badJson: 400,
      unauthenticated: 401,
      validation: 400,
      ok: 200,
    };
    const seen = new Set<string>();
    for (const [name, response] of Object.entries(responses)) {
      assert.equal(response.status, expected[name as keyof typeof responses], name);
      const id = response.headers.get('x-request-id');
      assert.match(id ?? '', UUID, name);
      seen.add(id!);
      await response.arrayBuffer();
    }
    assert.equal(seen.size, Object.keys(responses).length, 'every response gets its own id');
  });

  it('echoes a well-formed incoming X-Request-Id and replaces a malformed one', async () => {
    const wellFormed = ['req-42', 'trace.abc:DEF_9-x', 'a'.repeat(128), randomBytes(8).toString('hex')];
    for (const id of wellFormed) {
      for (const response of [
        await get('/health', { 'x-request-id': id }),
        await get('/missing', { 'x-request-id': id }),
        await post(JSON.stringify({ method: 'Nope.nothing' }), { 'x-request-id': id }),
        await post(JSON.stringify({ method: 'AuthRpc.getClientConfig' }), { 'x-request-id': id }),
      ]) {
        assert.equal(response.headers.get('x-request-id'), id, `${response.url} ${id}`);
        await response.arrayBuffer();
      }
    }
    const malformed = ['has spaces in it', 'a'.repeat(129), 'slash/inside', 'quote"d', 'semi;colon', 'comma,separated'];
    for (const id of malformed) {
      for (const response of [
        await get('/health', { 'x-request-id': id }),
        await get('/missing', { 'x-request-id': id }),
        await post(JSON.stringify({ method: 'Nope.nothing' }), { 'x-request-id': id }),
      ]) {
        const answered = response.headers.get('x-request-id');
        assert.match(answered ?? '', UUID, `${response.url} ${JSON.stringify(id)} -> ${answered}`);
        await response.arrayBuffer();
      }
    }
  });
});

describe('the server process', () => {
  const dirs: string[] = [];
  after(() => {
    killLeftoverProcesses();
    for (const dir of dirs) rmSync(dir, { recursive: true, force: true });
  });

  it('shuts down cleanly on SIGTERM', async () => {
    const dataDir = tempDir('rpc-sigterm-');
    dirs.push(dataDir);
    const port = await freePort();
    const server = runServer({ PORT: String(port), HOST: '127.0.0.1', DATA_DIR: dataDir, LOG_LEVEL: 'info', WORKERS: '1' });
    const base = `http://127.0.0.1:${port}`;

    const deadline = Date.now() + 30_000;
    let healthy = false;
    while (!healthy) {
      assert.equal(server.child.exitCode, null, `server exited early:\n${server.stdout()}\n${server.stderr()}`);
      assert.ok(Date.now() < deadline, `no /health within 30 s:\n${server.stdout()}\n${server.stderr()}`);
      healthy = await fetch(`${base}/health`, { signal: AbortSignal.timeout(1000) })
        .then((response) => response.status === 200)
        .catch(() => false);
      if (!healthy) await new Promise((resolve) => setTimeout(resolve, 200));
    }
    const config = await fetch(`${base}/api/rpc`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ method: 'AuthRpc.getClientConfig', params: {} }),
    });
    assert.equal(config.status, 200);
    await config.arrayBuffer();

    assert.ok(server.child.kill('SIGTERM'));
    const { code, signal } = await server.exited(15_000);
    assert.equal(signal, null, 'exits by itself, not by the signal');
    assert.equal(code, 0, server.stderr());

    const lines = server
      .stdout()
      .split('\n')
      .filter(Boolean)
      .map((line) => JSON.parse(line) as { msg: string; [field: string]: unknown });
    const listening = lines.find((line) => line.msg === 'listening');
    assert.ok(listening, server.stdout());
    assert.equal(listening.url, base);
    const shutdown = lines.find((line) => line.msg === 'shutting down');
    assert.ok(shutdown, `no 'shutting down' line in:\n${server.stdout()}`);
    assert.equal(shutdown.signal, 'SIGTERM');
    assert.ok(lines.indexOf(shutdown) > lines.indexOf(listening));
    assert.ok(existsSync(path.join(dataDir, 'master.key')));
    await assert.rejects(fetch(`${base}/health`, { signal: AbortSignal.timeout(2000) }), 'the port is closed after exit');
  });

  // These need no database; they run side by side.
  describe('start-up refusals', { concurrency: true }, () => {
    for (const [title, env, message] of [
      [
        'refuses DATABASE_URL without MASTER_KEY',
        { DATABASE_URL: 'postgres://postgres@127.0.0.1:5432/test' },
        /^Cannot start: MASTER_KEY is required with DATABASE_URL/m,
      ],
      ['refuses a PORT that is not a number', { PORT: 'abc' }, /^Cannot start: Invalid configuration: PORT must be a whole number/m],
      ['refuses a MASTER_KEY that is not 32 bytes', { MASTER_KEY: 'short' }, /^Cannot start: MASTER_KEY must be 32 bytes in base64/m],
    ] as const) {
      it(title, async () => {
        const dataDir = tempDir('rpc-refusal-');
        dirs.push(dataDir);
        const server = runServer({ DATA_DIR: dataDir, LOG_LEVEL: 'info', WORKERS: '1', PORT: '0', ...env });
        const { code } = await server.exited(20_000);
        assert.notEqual(code, 0);
        assert.equal(code, 1);
        assert.match(server.stderr(), message);
        assert.doesNotMatch(server.stderr(), /^\s+at /m, 'a plain message, not a stack trace');
        assert.doesNotMatch(server.stdout(), /"msg":"listening"/);
        assert.deepEqual(readdirSync(dataDir), [], 'nothing was written to DATA_DIR');
      });
    }
  });
});
