import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { RpcError } from 'rpc-service/plugin';
import { callerAt, refused, type Who } from '../../../test/support/caller.ts';
import { createScratchDatabase, databaseEnv, TEST_DATABASE_URL } from '../../../test/support/database.ts';
import { startTestApp, type TestApp } from '../../../test/support/harness.ts';
import { eventually } from '../../../test/support/peers.ts';
import { freePort, killLeftoverProcesses, runServer, whenHealthy, type RunningProcess } from '../../../test/support/process.ts';
import { addUser, type Member } from '../../../test/support/users.ts';

/** Whether a process lives (a zombie, ended but not yet reaped by its new parent, does not). */
function alive(pid: number): boolean {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    return stat.slice(stat.lastIndexOf(')') + 2)[0] !== 'Z';
  } catch {
    return false;
  }
}

/** A shell that starts a long sleep of its own and prints its pid: the sleep is in the shell's session, not its child in our records. */
const SHELL_WITH_CHILD = ['-c', 'sleep 600 & echo "child $!"; wait'];

describe('ProcessExecutorRpc', () => {
  let t: TestApp;
  let admin: Awaited<ReturnType<TestApp['signup']>>;
  let member: Member;
  let stranger: Awaited<ReturnType<TestApp['signup']>>;
  const start = (command: string, args: string[] = [], session: Who = admin) => t.as(session).ProcessExecutorRpc.startProcess({ command, args });
  const status = (instanceId: string) => t.as(admin).ProcessExecutorRpc.getProcessStatus({ instanceId });
  const logs = async (instanceId: string) => (await t.as(admin).ProcessExecutorRpc.getProcessLogs({ instanceId })).logs;

  before(async () => {
    t = await startTestApp({
      withNotes: false,
      plugins: ['auth', 'process-executor'],
      env: { PROCESS_ALLOWED_COMMANDS: '/bin/cat,/bin/sh', PROCESS_STOP_GRACE_MS: '500', PROCESS_LEASE_MS: '10000' },
    });
    admin = await t.signup();
    member = await addUser(t, admin.subscriptionId, 'user');
    stranger = await t.signup();
  });
  after(() => t.close());

  it('starts a process that echoes its input, reads its logs, and stops it', async () => {
    const started = await start('/bin/cat');
    assert.equal(started.status, 'running');
    const { instanceId } = started;
    assert.equal((await status(instanceId)).status, 'running');
    assert.match((await t.as(admin).ProcessExecutorRpc.sendProcessInput({ instanceId, input: 'hello\nworld\n' })).message, /Sent 12 bytes/);
    assert.deepEqual(await eventually(async () => ((await logs(instanceId)).length === 2 ? logs(instanceId) : undefined)), ['hello', 'world']);
    assert.deepEqual(await t.as(admin).ProcessExecutorRpc.stopProcess({ instanceId }), { message: `Process ${instanceId} stopped` });
    const stopped = await status(instanceId);
    assert.deepEqual([stopped.status, stopped.signal, stopped.command], ['stopped', 'SIGTERM', '/bin/cat']);
    assert.deepEqual(await logs(instanceId), ['hello', 'world'], 'the lines outlive the process');
    await refused(t.as(admin).ProcessExecutorRpc.sendProcessInput({ instanceId, input: 'again' }), 'CONFLICT');
  });

  it('records how a process ended: exited, failed with its code, stderr marked; no shell, and none of the service’s environment', async () => {
    process.env.PROCESS_TEST_SECRET = 'the service environment';
    const ok = (
      await start('/bin/sh', ['-c', 'echo "$0 $1" && echo warning >&2 && echo "secret=${PROCESS_TEST_SECRET:-none} home=$HOME"', 'one; rm -rf /', 'two'])
    ).instanceId;
    const exited = await eventually(async () => ((await status(ok)).status !== 'running' ? status(ok) : undefined));
    assert.deepEqual([exited.status, exited.exitCode], ['exited', 0]);
    const lines = await logs(ok);
    assert.equal(lines[0], 'one; rm -rf / two', 'arguments reach the command as they are');
    assert.ok(lines.includes('[stderr] warning'));
    assert.match(
      lines.find((line) => line.startsWith('secret='))!,
      /^secret=none home=\/.+\/rpc-service-processes\/[0-9a-f-]{36}$/,
    );

    const failing = (await start('/bin/sh', ['-c', 'exit 3'])).instanceId;
    const failed = await eventually(async () => ((await status(failing)).status !== 'running' ? status(failing) : undefined));
    assert.deepEqual([failed.status, failed.exitCode], ['failed', 3]);
  });

  it('kills a process that ignores SIGTERM after the grace period', async () => {
    const stubborn = (await start('/bin/sh', ['-c', 'trap "" TERM; echo ready; while true; do sleep 0.05; done'])).instanceId;
    await eventually(async () => ((await logs(stubborn)).includes('ready') ? true : undefined));
    const started = Date.now();
    await t.as(admin).ProcessExecutorRpc.stopProcess({ instanceId: stubborn });
    assert.ok(Date.now() - started >= 450, 'it waited the grace period');
    const killed = await status(stubborn);
    assert.deepEqual([killed.status, killed.signal], ['stopped', 'SIGKILL']);
  });

  it('refuses commands outside the allow-list, callers who are not admins, and other subscriptions', async () => {
    const outside = await refused(start('/bin/rm', ['-rf', '/tmp/x']), 'VALIDATION_ERROR');
    assert.equal(outside.issues?.[0]?.path, 'command');
    await refused(start('cat'), 'VALIDATION_ERROR', 'only the exact paths allowed');
    await refused(start('/bin/cat', [], member), 'FORBIDDEN');

    const { instanceId } = await start('/bin/cat');
    const strangerAdmin = t.as(stranger).ProcessExecutorRpc;
    for (const [method, call] of [
      ['ProcessExecutorRpc.getProcessStatus', () => strangerAdmin.getProcessStatus({ instanceId })],
      ['ProcessExecutorRpc.getProcessLogs', () => strangerAdmin.getProcessLogs({ instanceId })],
      ['ProcessExecutorRpc.sendProcessInput', () => strangerAdmin.sendProcessInput({ instanceId, input: 'x' })],
      ['ProcessExecutorRpc.stopProcess', () => strangerAdmin.stopProcess({ instanceId })],
    ] as const) {
      await refused(call(), 'NOT_FOUND', method);
    }
    assert.equal((await status(instanceId)).status, 'running');
    await t.as(admin).ProcessExecutorRpc.stopProcess({ instanceId });
  });

  it('stops what a process started in turn, with it', async () => {
    const { instanceId, pid } = await start('/bin/sh', SHELL_WITH_CHILD);
    assert.ok(pid, 'the process has a pid');
    const line = await eventually(async () => (await logs(instanceId)).find((text) => text.startsWith('child ')));
    const child = Number(line.split(' ')[1]);
    assert.ok(alive(pid) && alive(child));
    await t.as(admin).ProcessExecutorRpc.stopProcess({ instanceId });
    assert.equal((await status(instanceId)).status, 'stopped');
    await eventually(async () => (!alive(child) ? true : undefined));
  });

  it('keeps the record of a live process running past its lease, and kills the process whose record the recovery job ended', async () => {
    const { processExecutor, db } = t.app.depsOf('process-executor');
    const { instanceId, pid } = await start('/bin/cat');
    assert.ok(pid, 'the process has a pid');
    const leaseUntil = async () => {
      const [row] = (await db
        .forkEm(null)
        .execute(`select lease_until from process_executor_instance where subscription_id = ? and id = ?`, [admin.subscriptionId, instanceId])) as {
        lease_until: string | Date;
      }[];
      return new Date(row!.lease_until).getTime();
    };
    // Its node renews the lease (every third of its 10 s) while the process runs: the lease moves on, so the recovery job leaves it.
    const first = await leaseUntil();
    await eventually(async () => ((await leaseUntil()) > first ? true : undefined));
    assert.deepEqual(await processExecutor.recover(), { ended: 0, killed: 0 });
    assert.equal((await status(instanceId)).status, 'running');
    assert.ok(alive(pid));

    // As if its node had lost the database past the lease: the recovery job ends the record and kills the process.
    await db
      .forkEm(null)
      .execute(`update process_executor_instance set lease_until = now() - interval '1 second' where subscription_id = ? and id = ?`, [
        admin.subscriptionId,
        instanceId,
      ]);
    assert.deepEqual(await processExecutor.recover(), { ended: 1, killed: 1 });
    const ended = await status(instanceId);
    assert.deepEqual([ended.status, ended.error], ['failed', 'its node stopped while it ran']);
    await eventually(async () => (!alive(pid) ? true : undefined));
    assert.equal((await status(instanceId)).status, 'failed', 'its node does not overwrite the end the recovery job recorded');
  });
});

describe('ProcessExecutorRpc when its node is killed', () => {
  const dataDir = mkdtempSync(path.join(tmpdir(), 'rpc-process-crash-'));
  let server: RunningProcess;
  after(() => {
    killLeftoverProcesses();
    rmSync(dataDir, { recursive: true, force: true });
  });

  it('ends the records of a node killed with SIGKILL once started again, leaves none of its processes running, and lets the subscription start others', async () => {
    const scratch = TEST_DATABASE_URL ? await createScratchDatabase(TEST_DATABASE_URL) : undefined;
    try {
      const port = await freePort();
      const base = `http://127.0.0.1:${port}`;
      const env = {
        PORT: String(port),
        HOST: '127.0.0.1',
        DATA_DIR: dataDir,
        LOG_LEVEL: 'warn',
        WORKERS: '1',
        PROCESS_ALLOWED_COMMANDS: '/bin/sh',
        PROCESS_MAX_RUNNING: '1',
        PROCESS_LEASE_MS: '2000',
        ...(scratch ? { ...databaseEnv(scratch.url), MASTER_KEY: randomBytes(32).toString('base64') } : {}),
      };
      server = runServer(env);
      await whenHealthy(server, base);
      const anonymous = callerAt(base, null);
      await anonymous.AuthRpc.signup({ email: 'owner@example.com', username: 'owner', password: 'correct horse battery' });
      const owner = callerAt(base, { token: (await anonymous.AuthRpc.login({ identifier: 'owner', password: 'correct horse battery' })).token });
      const { instanceId, pid } = await owner.ProcessExecutorRpc.startProcess({ command: '/bin/sh', args: SHELL_WITH_CHILD });
      assert.ok(pid, 'the process has a pid');
      const line = await eventually(async () => (await owner.ProcessExecutorRpc.getProcessLogs({ instanceId })).logs.find((text) => text.startsWith('child ')));
      const child = Number(line.split(' ')[1]);
      assert.ok(alive(pid) && alive(child));
      await refused(owner.ProcessExecutorRpc.startProcess({ command: '/bin/sh', args: ['-c', 'true'] }), 'CONFLICT', 'PROCESS_MAX_RUNNING is 1');

      server.child.kill('SIGKILL');
      await server.exited(10_000);
      await eventually(async () => (!alive(pid) ? true : undefined));
      // The record's lease (2 s) runs out before the next start, whose recovery job ends it.
      await new Promise((resolve) => setTimeout(resolve, 2500));
      server = runServer(env);
      await whenHealthy(server, base);
      const ended = await eventually(async () => {
        const record = await owner.ProcessExecutorRpc.getProcessStatus({ instanceId });
        return record.status === 'running' ? undefined : record;
      }, 90_000);
      assert.deepEqual([ended.status, ended.error], ['failed', 'its node stopped while it ran']);
      assert.ok(ended.endedAt);
      await eventually(async () => (!alive(child) ? true : undefined));
      assert.equal(alive(pid) || alive(child), false, 'neither the process nor what it started outlives its node');
      const next = await owner.ProcessExecutorRpc.startProcess({ command: '/bin/sh', args: ['-c', 'echo again'] });
      assert.equal(next.status, 'running', 'the subscription starts processes again');
      server.child.kill('SIGTERM');
      await server.exited(30_000);
    } finally {
      await scratch?.drop();
    }
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
      const { instanceId } = await t.as(admin).ProcessExecutorRpc.startProcess({ command: '/bin/sh', args: ['-c', 'echo before'] });
      const ended = await eventually(async () => {
        const status = await t!.as(admin).ProcessExecutorRpc.getProcessStatus({ instanceId });
        return status.status === 'running' ? undefined : status;
      });
      await t.close();
      t = undefined;

      t = await startTestApp(options);
      const unknown = '00000000-0000-4000-8000-000000000000';
      /** What each operation on the process answers: OK, or the code it is refused with. */
      const answers = async (who: Who, id: string) => {
        const caller = t!.as(who).ProcessExecutorRpc;
        const codes: Record<string, string> = {};
        for (const [method, call] of [
          ['ProcessExecutorRpc.getProcessStatus', () => caller.getProcessStatus({ instanceId: id })],
          ['ProcessExecutorRpc.getProcessLogs', () => caller.getProcessLogs({ instanceId: id })],
          ['ProcessExecutorRpc.sendProcessInput', () => caller.sendProcessInput({ instanceId: id, input: 'x' })],
          ['ProcessExecutorRpc.stopProcess', () => caller.stopProcess({ instanceId: id })],
        ] as const) {
          codes[method] = await call().then(
            () => 'OK',
            (error: unknown) => {
              if (error instanceof RpcError) return error.code;
              throw error;
            },
          );
        }
        return codes;
      };
      const readable = {
        'ProcessExecutorRpc.getProcessStatus': 'OK',
        'ProcessExecutorRpc.getProcessLogs': 'OK',
        'ProcessExecutorRpc.sendProcessInput': 'CONFLICT',
        'ProcessExecutorRpc.stopProcess': 'CONFLICT',
      };
      assert.deepEqual(await answers(admin, instanceId), readable, 'a process that ran before is read; it has ended, so input and stop are CONFLICT');
      assert.deepEqual(await t.as(admin).ProcessExecutorRpc.getProcessStatus({ instanceId }), ended);
      assert.deepEqual(await t.as(admin).ProcessExecutorRpc.getProcessLogs({ instanceId }), { logs: ['before'] });
      const everyOne = (code: string) => Object.fromEntries(Object.keys(readable).map((method) => [method, code]));
      assert.deepEqual(await answers(admin, unknown), everyOne('NOT_FOUND'), 'an unknown process');
      assert.deepEqual(await answers(stranger, instanceId), everyOne('NOT_FOUND'), "another subscription's process");

      const start = await refused(t.as(admin).ProcessExecutorRpc.startProcess({ command: '/bin/sh' }), 'FEATURE_UNAVAILABLE');
      assert.match(start.message, /PROCESS_ALLOWED_COMMANDS/);
    } finally {
      await t?.close();
      await scratch?.drop();
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
