import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { createScratchDatabase, TEST_DATABASE_URL } from '../support/database.ts';
import { startTestApp, type TestApp } from '../support/harness.ts';
import { eventually } from '../support/peers.ts';
import { addUser } from '../support/users.ts';

describe('ProcessExecutorRpc', () => {
  let t: TestApp;
  let admin: Awaited<ReturnType<TestApp['signup']>>;
  let member: Awaited<ReturnType<typeof addUser>>;
  let stranger: Awaited<ReturnType<TestApp['signup']>>;
  const as = (session: { token: string }) => ({ token: session.token });
  const start = (command: string, args: string[] = [], session: { token: string } = admin) =>
    t.call('ProcessExecutorRpc.startProcess', { command, args }, as(session));
  const status = (instanceId: string) => t.ok('ProcessExecutorRpc.getProcessStatus', { instanceId }, as(admin));
  const logs = async (instanceId: string) => (await t.ok('ProcessExecutorRpc.getProcessLogs', { instanceId }, as(admin))).logs as string[];

  before(async () => {
    t = await startTestApp({
      withNotes: false,
      plugins: ['auth', 'process-executor'],
      env: { PROCESS_ALLOWED_COMMANDS: '/bin/cat,/bin/sh', PROCESS_STOP_GRACE_MS: '500' },
    });
    admin = await t.signup();
    member = await addUser(t, admin.subscriptionId, 'user');
    stranger = await t.signup();
  });
  after(() => t.close());

  it('starts a process that echoes its input, reads its logs, and stops it', async () => {
    const started = await start('/bin/cat');
    assert.equal(started.body.data.status, 'running');
    const { instanceId } = started.body.data;
    assert.equal((await status(instanceId)).status, 'running');
    assert.match((await t.ok('ProcessExecutorRpc.sendProcessInput', { instanceId, input: 'hello\nworld\n' }, as(admin))).message, /Sent 12 bytes/);
    assert.deepEqual(await eventually(async () => ((await logs(instanceId)).length === 2 ? logs(instanceId) : undefined)), ['hello', 'world']);
    assert.deepEqual(await t.ok('ProcessExecutorRpc.stopProcess', { instanceId }, as(admin)), { message: `Process ${instanceId} stopped` });
    const stopped = await status(instanceId);
    assert.deepEqual([stopped.status, stopped.signal, stopped.command], ['stopped', 'SIGTERM', '/bin/cat']);
    assert.deepEqual(await logs(instanceId), ['hello', 'world'], 'the lines outlive the process');
    const late = await t.call('ProcessExecutorRpc.sendProcessInput', { instanceId, input: 'again' }, as(admin));
    assert.equal(late.body.data.code, 'CONFLICT');
  });

  it('records how a process ended: exited, failed with its code, stderr marked; no shell, and none of the service’s environment', async () => {
    process.env.PROCESS_TEST_SECRET = 'the service environment';
    const ok = (
      await start('/bin/sh', ['-c', 'echo "$0 $1" && echo warning >&2 && echo "secret=${PROCESS_TEST_SECRET:-none} home=$HOME"', 'one; rm -rf /', 'two'])
    ).body.data.instanceId;
    const exited = await eventually(async () => ((await status(ok)).status !== 'running' ? status(ok) : undefined));
    assert.deepEqual([exited.status, exited.exitCode], ['exited', 0]);
    const lines = await logs(ok);
    assert.equal(lines[0], 'one; rm -rf / two', 'arguments reach the command as they are');
    assert.ok(lines.includes('[stderr] warning'));
    assert.match(
      lines.find((line) => line.startsWith('secret='))!,
      /^secret=none home=\/.+\/rpc-service-processes\/[0-9a-f-]{36}$/,
    );

    const failing = (await start('/bin/sh', ['-c', 'exit 3'])).body.data.instanceId;
    const failed = await eventually(async () => ((await status(failing)).status !== 'running' ? status(failing) : undefined));
    assert.deepEqual([failed.status, failed.exitCode], ['failed', 3]);
  });

  it('kills a process that ignores SIGTERM after the grace period', async () => {
    const stubborn = (await start('/bin/sh', ['-c', 'trap "" TERM; echo ready; while true; do sleep 0.05; done'])).body.data.instanceId;
    await eventually(async () => ((await logs(stubborn)).includes('ready') ? true : undefined));
    const started = Date.now();
    await t.ok('ProcessExecutorRpc.stopProcess', { instanceId: stubborn }, as(admin));
    assert.ok(Date.now() - started >= 450, 'it waited the grace period');
    const killed = await status(stubborn);
    assert.deepEqual([killed.status, killed.signal], ['stopped', 'SIGKILL']);
  });

  it('refuses commands outside the allow-list, callers who are not admins, and other subscriptions', async () => {
    const refused = await start('/bin/rm', ['-rf', '/tmp/x']);
    assert.deepEqual([refused.body.data.code, refused.body.data.issues[0].path], ['VALIDATION_ERROR', 'command']);
    assert.equal((await start('cat')).body.data.code, 'VALIDATION_ERROR', 'only the exact paths allowed');
    assert.equal((await start('/bin/cat', [], member)).body.data.code, 'FORBIDDEN');

    const { instanceId } = (await start('/bin/cat')).body.data;
    const strangerAdmin = as(stranger);
    for (const [method, params] of [
      ['ProcessExecutorRpc.getProcessStatus', { instanceId }],
      ['ProcessExecutorRpc.getProcessLogs', { instanceId }],
      ['ProcessExecutorRpc.sendProcessInput', { instanceId, input: 'x' }],
      ['ProcessExecutorRpc.stopProcess', { instanceId }],
    ] as const) {
      assert.equal((await t.call(method, params, strangerAdmin)).body.data.code, 'NOT_FOUND', method);
    }
    assert.equal((await status(instanceId)).status, 'running');
    await t.ok('ProcessExecutorRpc.stopProcess', { instanceId }, as(admin));
  });
});

describe('ProcessExecutorRpc once the allow-list is emptied', () => {
  it('refuses to start with FEATURE_UNAVAILABLE, keeps earlier processes readable, and answers NOT_FOUND for unknown or foreign ones', async () => {
    // One database kept across the two starts: PostgreSQL with TEST_DATABASE_URL, else the embedded one on disk.
    const dir = mkdtempSync(path.join(tmpdir(), 'rpc-process-'));
    const scratch = TEST_DATABASE_URL ? await createScratchDatabase(TEST_DATABASE_URL) : undefined;
    const options = { withNotes: false, plugins: ['auth', 'process-executor'], dataDir: dir, persistent: true, databaseUrl: scratch?.url };
    let t: TestApp | undefined;
    try {
      t = await startTestApp({ ...options, env: { PROCESS_ALLOWED_COMMANDS: '/bin/sh' } });
      const admin = await t.signup();
      const stranger = await t.signup();
      const { instanceId } = await t.ok('ProcessExecutorRpc.startProcess', { command: '/bin/sh', args: ['-c', 'echo before'] }, { token: admin.token });
      const ended = await eventually(async () => {
        const status = await t!.ok('ProcessExecutorRpc.getProcessStatus', { instanceId }, { token: admin.token });
        return status.status === 'running' ? undefined : status;
      });
      await t.close();
      t = undefined;

      t = await startTestApp(options);
      const unknown = '00000000-0000-4000-8000-000000000000';
      const answers = async (token: string, id: string) => {
        const codes: Record<string, string> = {};
        for (const [method, params] of [
          ['ProcessExecutorRpc.getProcessStatus', { instanceId: id }],
          ['ProcessExecutorRpc.getProcessLogs', { instanceId: id }],
          ['ProcessExecutorRpc.sendProcessInput', { instanceId: id, input: 'x' }],
          ['ProcessExecutorRpc.stopProcess', { instanceId: id }],
        ] as const) {
          const response = await t!.call(method, params, { token });
          codes[method] = response.body.success ? 'OK' : response.body.data.code;
        }
        return codes;
      };
      const readable = {
        'ProcessExecutorRpc.getProcessStatus': 'OK',
        'ProcessExecutorRpc.getProcessLogs': 'OK',
        'ProcessExecutorRpc.sendProcessInput': 'CONFLICT',
        'ProcessExecutorRpc.stopProcess': 'CONFLICT',
      };
      assert.deepEqual(await answers(admin.token, instanceId), readable, 'a process that ran before is read; it has ended, so input and stop are CONFLICT');
      assert.deepEqual(await t.ok('ProcessExecutorRpc.getProcessStatus', { instanceId }, { token: admin.token }), ended);
      assert.deepEqual(await t.ok('ProcessExecutorRpc.getProcessLogs', { instanceId }, { token: admin.token }), { logs: ['before'] });
      const everyOne = (code: string) => Object.fromEntries(Object.keys(readable).map((method) => [method, code]));
      assert.deepEqual(await answers(admin.token, unknown), everyOne('NOT_FOUND'), 'an unknown process');
      assert.deepEqual(await answers(stranger.token, instanceId), everyOne('NOT_FOUND'), "another subscription's process");

      const start = await t.call('ProcessExecutorRpc.startProcess', { command: '/bin/sh' }, { token: admin.token });
      assert.deepEqual([start.status, start.body.data.code], [503, 'FEATURE_UNAVAILABLE']);
      assert.match(start.body.data.error, /PROCESS_ALLOWED_COMMANDS/);
    } finally {
      await t?.close();
      await scratch?.drop();
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
