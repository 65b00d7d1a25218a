import assert from 'node:assert/strict';
import { chmodSync, chownSync, existsSync, mkdirSync, mkdtempSync, readFileSync, renameSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { fileURLToPath, pathToFileURL } from 'node:url';
import * as tar from 'tar';
import { databaseCheck } from '../../core/operator/doctor.ts';
import { CORE_VERSION } from '../../core/base/version.ts';
import { callerAt, refused } from '../support/caller.ts';
import { createScratchDatabase, databaseEnv, type ScratchDatabase, TEST_DATABASE_URL } from '../support/database.ts';
import { TEST_MASTER_KEY } from '../support/harness.ts';
import { freePort, killLeftoverProcesses, runInProject, whenHealthy, type RunningProcess } from '../support/process.ts';

/**
 * `rpc-service admin create`, `doctor` and `jobs list|retry|purge` as the
 * operator runs them: first while the service serves (on the embedded
 * database the commands reach it through its control socket, since it owns
 * the database), then with the service stopped (each command opens the
 * installation itself; a backup taken so is restored elsewhere). One
 * installation throughout, with a plugin package whose job fails on its
 * first attempt and succeeds on the next.
 */
const STEP_MS = 120_000;
const PASSWORD = 'a long enough password';
const QUEUE = 'failing.boom';
/** Job data a listing must never show: it may be a tenant's content. */
const TENANT_CONTENT = 'tenant-content-never-listed';
/** The failing plugin's package version, which a backup's manifest records. */
const FAILING_VERSION = '1.2.3';
/** Node flags under which the command's standard error passes for a terminal, so it draws its progress bars as it would on one. */
const ON_A_TERMINAL = ['--import', 'data:text/javascript,Object.defineProperty(process.stderr,"isTTY",{value:true})'];

/** The bars of these stages were drawn, each to its end. */
function drewBars(output: string, ...labels: string[]): void {
  for (const label of labels) assert.match(output, new RegExp(`${label}\\s+\\[[^\\]]*\\] 100% \\S+`), `a ${label} bar in: ${output}`);
}

const sdk = pathToFileURL(fileURLToPath(new URL('../../core/plugin/sdk.ts', import.meta.url))).href;
/** The plugin, outside the project: it names the SDK and valibot by the files the service loads, so both are the same modules. */
const FAILING_PLUGIN = `
import * as v from '${import.meta.resolve('valibot')}';
import { definePlugin, jobBuilder, operationBuilder } from '${sdk}';

const defineOperation = operationBuilder();
const defineJob = jobBuilder();

export const failingPlugin = definePlugin({
  id: 'failing',
  group: 'FailingRpc',
  coreVersion: '^2.0.0',
  deps: ['jobs'],
  jobs: {
    boom: defineJob({
      describe: 'Fails on its first attempt, succeeds on the next.',
      data: v.object({ note: v.string() }),
      retry: { limit: 0 },
      handler: ({ job }) => {
        if (job.attempt === 1) throw new Error('boom on attempt 1');
        return { attempt: job.attempt };
      },
    }),
  },
  operations: {
    enqueue: defineOperation({
      access: 'user',
      kind: 'write',
      describe: 'Enqueue a boom job.',
      params: v.object({ note: v.string() }),
      handler: async ({ params, ctx, deps }) => ({ id: await deps.jobs.enqueue('boom', params, { ctx }) }),
    }),
    state: defineOperation({
      access: 'user',
      kind: 'read',
      describe: "A boom job's state.",
      params: v.object({ id: v.string() }),
      handler: async ({ params, deps }) => ({ state: (await deps.jobs.get('boom', params.id))?.state ?? null }),
    }),
  },
});
`;

/** A plugin with a migration, loaded by an installation a backup is restored into and not by the one it was taken of. */
const LATER_PLUGIN = `
import { definePlugin, Migration } from '${sdk}';

class Migration20270101000000_note extends Migration {
  up() {
    this.addSql('create table "later_note" ("id" int primary key);');
  }
}

export const laterPlugin = definePlugin({ id: 'later', group: 'LaterRpc', coreVersion: '^2.0.0', migrations: [Migration20270101000000_note], operations: {} });
`;

describe('rpc-service admin create, doctor and jobs', { timeout: 10 * 60_000 }, () => {
  const work = mkdtempSync(path.join(tmpdir(), 'rpc-operator-'));
  const dataDir = path.join(work, 'data');
  const passwordFile = path.join(work, 'password');
  const failingPlugin = path.join(work, 'failing-plugin');
  const laterPlugin = path.join(work, 'later-plugin');
  const archive = path.join(work, 'backup.tar.gz');
  const databases: ScratchDatabase[] = [];
  let env: Record<string, string> = {};
  let server: RunningProcess | undefined;
  let base = '';
  let token = '';
  /** `jobs list` before the backup taken with the service stopped: what the installations restored from it answer. */
  let listedAtBackup = '';

  /** `rpc-service <args>` as the operator types it (`node` flags before it): its exit code and output. */
  async function cli(
    args: string[],
    extra: Record<string, string> = {},
    node: string[] = [],
  ): Promise<{ code: number | null; output: string; stdout: string }> {
    const child = runInProject(process.execPath, [...node, 'bin/rpc-service.js', ...args], { ...env, ...extra });
    const { code } = await child.exited(STEP_MS);
    return { code, output: `${child.stdout()}${child.stderr()}`, stdout: child.stdout() };
  }

  /** Operations called on the running service over HTTP, with the owner's session once there is one. */
  const onService = () => callerAt(base, token ? { token } : null);

  async function jobState(id: string, state: string): Promise<void> {
    const deadline = Date.now() + 30_000;
    let seen: string | null = null;
    while (Date.now() < deadline) {
      seen = (await onService().call<{ state: string }>('FailingRpc.state', { id })).state;
      if (seen === state) return;
      await new Promise((resolve) => setTimeout(resolve, 200));
    }
    assert.fail(`job ${id} is ${seen}, not ${state}`);
  }

  async function enqueueFailing(): Promise<string> {
    const { id } = await onService().call<{ id: string }>('FailingRpc.enqueue', { note: TENANT_CONTENT });
    await jobState(id, 'dead');
    return id;
  }

  /** Another installation, beside this one: a DATA_DIR, and on PostgreSQL a database of its own. */
  async function installation(name: string, plugins: string): Promise<Record<string, string>> {
    const own = { ...env, DATA_DIR: path.join(work, name), PLUGINS: plugins };
    if (!TEST_DATABASE_URL) return own;
    const database = await createScratchDatabase(TEST_DATABASE_URL);
    databases.push(database);
    return { ...own, ...databaseEnv(database.url) };
  }

  before(async () => {
    for (const [folder, name, source, version] of [
      [failingPlugin, 'failing-plugin', FAILING_PLUGIN, FAILING_VERSION],
      [laterPlugin, 'later-plugin', LATER_PLUGIN, '0.1.0'],
    ]) {
      mkdirSync(folder);
      writeFileSync(path.join(folder, 'package.json'), JSON.stringify({ name, version, type: 'module', main: 'index.js' }));
      writeFileSync(path.join(folder, 'index.js'), source);
    }
    writeFileSync(passwordFile, `${PASSWORD}\n`);
    env = { DATA_DIR: dataDir, PLUGINS: failingPlugin, SIGNUP_MODE: 'invite', JOBS_POLL_MS: '500', LOG_LEVEL: 'warn' };
    if (TEST_DATABASE_URL) {
      const database = await createScratchDatabase(TEST_DATABASE_URL);
      databases.push(database);
      env = { ...env, ...databaseEnv(database.url), MASTER_KEY: TEST_MASTER_KEY };
    }
  });
  after(async () => {
    killLeftoverProcesses();
    for (const database of databases) await database.drop();
    rmSync(work, { recursive: true, force: true });
  });

  it('while the service serves: admin create, then login over HTTP; jobs list, retry and purge; doctor', async () => {
    const port = await freePort();
    base = `http://127.0.0.1:${port}`;
    // `rpc-service` with no command serves.
    server = runInProject(process.execPath, ['bin/rpc-service.js'], { ...env, PORT: String(port) });
    await whenHealthy(server, base);

    const created = await cli([
      'admin',
      'create',
      '--email',
      'Owner@Example.com',
      '--username',
      'owner',
      '--subscription-name',
      'Acme',
      '--password-file',
      passwordFile,
    ]);
    assert.equal(created.code, 0, created.output);
    const [, subscriptionId, userId] = /^Created subscription (\S+) \("Acme"\) and its admin owner: user (\S+)\.$/m.exec(created.output) ?? [];
    assert.ok(subscriptionId && userId, created.output);
    const session = await onService().AuthRpc.login({ identifier: 'owner@example.com', password: PASSWORD });
    assert.equal(session.user._id, userId);
    assert.equal(session.user.role, 'admin');
    token = session.token;
    // Invite mode: with a user in the installation, signup wants a code; the command was the way in.
    const refusal = await refused(onService().AuthRpc.signup({ email: 'someone@example.com', username: 'someone', password: PASSWORD }), 'VALIDATION_ERROR');
    assert.deepEqual(
      refusal.issues?.map((issue) => issue.path),
      ['inviteCode'],
    );

    const taken = await cli(['admin', 'create', '--email', 'owner@example.com', '--username', 'other', '--password-file', passwordFile]);
    assert.equal(taken.code, 1);
    assert.equal(taken.output.trim(), 'Cannot create the admin: This e-mail address is already registered');

    const first = await enqueueFailing();
    const listed = await cli(['jobs', 'list', '--queue', QUEUE]);
    assert.equal(listed.code, 0, listed.output);
    assert.match(listed.output, new RegExp(`^${QUEUE.replace('.', '\\.')}\\s+0\\s+0\\s+0\\s+0\\s+1\\s+0$`, 'm'));
    assert.match(listed.output, new RegExp(`^${first}  ${QUEUE}  \\S+Z  boom on attempt 1$`, 'm'));
    assert.ok(!listed.output.includes(TENANT_CONTENT), 'no job data in the listing');

    const retried = await cli(['jobs', 'retry', first]);
    assert.equal(retried.code, 0, retried.output);
    assert.match(retried.output, /^Put 1 dead job back in the queue\.$/m);
    await jobState(first, 'done');
    const second = await enqueueFailing();
    const all = await cli(['jobs', 'retry', '--all-failed', '--queue', QUEUE]);
    assert.match(all.output, /^Put 1 dead job back in the queue\.$/m);
    await jobState(second, 'done');
    const again = await cli(['jobs', 'retry', second]);
    assert.equal(again.code, 1);
    assert.equal(again.output.trim(), `Cannot retry: no dead job has the id ${second} (jobs list shows them)`);

    const purged = await cli(['jobs', 'purge', '--completed', '--queue', QUEUE]);
    assert.equal(purged.code, 0, purged.output);
    assert.match(purged.output, /^Deleted 2 done jobs of failing\.boom\.$/m);

    const doctor = await cli(['doctor']);
    assert.equal(doctor.code, 0, doctor.output);
    for (const check of ['configuration', 'master key', 'database', 'pgvector', 'migrations', 'clock', 'data keys']) {
      assert.match(doctor.output, new RegExp(`^ok\\s+${check}\\s`, 'm'), doctor.output);
    }
    assert.match(doctor.output, /^(ok|warn)\s+disk\s+\S+ \S+ free/m);
    // What backup and restore run on PostgreSQL; the embedded database needs neither.
    if (TEST_DATABASE_URL) assert.match(doctor.output, /^ok\s+backup tools\s+pg_dump \d+\.\d+, pg_restore \d+\.\d+$/m);
    else assert.doesNotMatch(doctor.output, /backup tools/);

    // Left dead for the commands run with the service stopped.
    await enqueueFailing();
    await enqueueFailing();
    server.child.kill('SIGTERM');
    assert.equal((await server.exited(30_000)).code, 0);
  });

  it('with the service stopped: the same commands open the installation themselves', async () => {
    const listed = await cli(['jobs', 'list']);
    assert.equal(listed.code, 0, listed.output);
    assert.match(listed.output, new RegExp(`^${QUEUE.replace('.', '\\.')}\\s+0\\s+0\\s+0\\s+0\\s+2\\s+0$`, 'm'));
    listedAtBackup = listed.output;

    // No process serves: the command opens the installation itself, and draws its own bars.
    const backedUp = await cli(['backup', '--out', archive], {}, ON_A_TERMINAL);
    assert.equal(backedUp.code, 0, backedUp.output);
    assert.match(backedUp.stdout, /^Wrote \S+backup\.tar\.gz \(.+, \d+ entries\)\. It holds/);
    drewBars(backedUp.output, 'database', 'packing');
    await tar.extract({ file: archive, cwd: work }, ['manifest.json']);
    const { plugins } = JSON.parse(readFileSync(path.join(work, 'manifest.json'), 'utf8'));
    assert.deepEqual(
      plugins.find((plugin: { id: string }) => plugin.id === 'failing'),
      { id: 'failing', version: FAILING_VERSION },
      'a package plugin: its version',
    );
    assert.deepEqual(
      plugins.find((plugin: { id: string }) => plugin.id === 'auth'),
      { id: 'auth', version: CORE_VERSION },
      "a built-in one: the service's",
    );

    const unknownCommand = await cli(['nosuch']);
    assert.equal(unknownCommand.code, 1);
    assert.equal(unknownCommand.output.trim(), 'Unknown command "nosuch": rpc-service --help lists the commands.');

    const recent = await cli(['jobs', 'purge', '--failed', '--older-than', '7d']);
    assert.match(recent.output, /^Deleted 0 dead jobs older than 7d\.$/m);
    const purged = await cli(['jobs', 'purge', '--failed', '--queue', QUEUE]);
    assert.equal(purged.code, 0, purged.output);
    assert.match(purged.output, /^Deleted 2 dead jobs of failing\.boom\.$/m);

    const both = await cli(['jobs', 'purge']);
    assert.equal(both.code, 1);
    assert.equal(both.output.trim(), 'Cannot purge the jobs: give --failed or --completed (one of them)');
    const unknown = await cli(['jobs', 'retry', '--all-failed', '--queue', 'nope']);
    assert.equal(unknown.code, 1);
    assert.match(unknown.output, /^Cannot retry: there is no queue "nope"; the queues are: .*failing\.boom/);

    const invalid = await cli(['admin', 'create', '--email', 'not an address', '--username', 'x', '--password-file', passwordFile]);
    assert.equal(invalid.code, 1);
    assert.equal(
      invalid.output.trim(),
      'Cannot create the admin: email: Invalid e-mail address; username: Username must be 3 to 32 letters, digits, dots, dashes or underscores',
    );

    const healthy = await cli(['doctor']);
    assert.equal(healthy.code, 0, healthy.output);
    assert.match(healthy.output, /^ok\s+data keys\s/m);
  });

  it('restores the backup taken with the service stopped where its plugins are loaded, or with --allow-missing-plugins', async () => {
    // The installation restored from it answers as the one backed up did.
    const same = await installation('restored', failingPlugin);
    const restored = await cli(['restore', '--from', archive], same);
    assert.equal(restored.code, 0, restored.output);
    const listed = await cli(['jobs', 'list'], same);
    // Every opening of an installation enqueues the start-up work of some queues: the failing queue and its dead jobs are what stay.
    const kept = (listing: string) => [listing.match(/^failing\.boom .*$/m)?.[0], listing.slice(listing.indexOf('Dead jobs'))];
    assert.deepEqual(kept(listed.output), kept(listedAtBackup));

    // Without the failing plugin: refused, naming it and its version, and no DATA_DIR left behind.
    const other = await installation('without-failing', laterPlugin);
    const refused = await cli(['restore', '--from', archive], other);
    assert.equal(refused.code, 1);
    assert.equal(
      refused.output.trim(),
      `Cannot restore: ${archive} holds the data of plugins this installation does not load: failing ${FAILING_VERSION}. ` +
        'Install them and name them in PLUGINS, as where the backup was made; or give --allow-missing-plugins to restore their data unused',
    );
    assert.equal(existsSync(other.DATA_DIR), false);
    // Allowed: restored unused; the later plugin, which the backup did not have, has its migration applied after.
    const allowed = await cli(['restore', '--from', archive, '--allow-missing-plugins'], other, ON_A_TERMINAL);
    assert.equal(allowed.code, 0, allowed.output);
    assert.match(
      allowed.stdout,
      new RegExp(
        `then applied 1 migration\\. The data of failing ${FAILING_VERSION.replaceAll('.', '\\.')} is restored but unused: this installation does not load them\\.$`,
        'm',
      ),
    );
    drewBars(allowed.output, 'unpacking', 'database', 'migrations');
  });

  it('doctor names a failed check and what to do, with exit code 1', async () => {
    const badSetting = await cli(['doctor'], { PORT: 'eighty' });
    assert.equal(badSetting.code, 1);
    assert.match(badSetting.output, /^fail\s+configuration\s+Invalid configuration: PORT must be a whole number/m);
    assert.doesNotMatch(badSetting.output, /\n\s+at /, 'no stack');

    const unreachable = await cli(['doctor'], { DATABASE_URL: 'postgres://postgres@127.0.0.1:1/nowhere', MASTER_KEY: TEST_MASTER_KEY });
    assert.equal(unreachable.code, 1);
    assert.match(unreachable.output, /^fail\s+database\s+.*ECONNREFUSED.*: check DATABASE_URL/m);

    // The server's version, as the database check reads it: none of ours is that old.
    const old = databaseCheck('postgresql', '13.11', 130011);
    assert.deepEqual(old, {
      name: 'database',
      status: 'fail',
      message: 'PostgreSQL 13.11 is older than 14, the oldest this version supports: upgrade the server',
    });
    assert.equal(databaseCheck('postgresql', '14.0', 140000).status, 'ok');

    if (TEST_DATABASE_URL) {
      // A PATH with an old pg_dump and no pg_restore: a warning that says what to install.
      const bin = path.join(work, 'old-client');
      mkdirSync(bin);
      writeFileSync(path.join(bin, 'pg_dump'), '#!/bin/sh\necho "pg_dump (PostgreSQL) 9.6.24"\n');
      chmodSync(path.join(bin, 'pg_dump'), 0o755);
      const oldClient = await cli(['doctor'], { PATH: bin });
      assert.equal(oldClient.code, 0, oldClient.output);
      assert.match(
        oldClient.output,
        /^warn\s+backup tools\s+pg_dump 9\.6 is older than the server, pg_restore is not on PATH: install PostgreSQL's client programs (\d+) or newer \(Debian: postgresql-client-\1\), for rpc-service backup and restore$/m,
      );
    }

    if (TEST_DATABASE_URL) {
      const { MASTER_KEY: _, ...withoutKey } = env;
      env = withoutKey;
      const noKey = await cli(['doctor']);
      assert.equal(noKey.code, 1);
      assert.match(noKey.output, /^fail\s+master key\s+MASTER_KEY is required with DATABASE_URL/m);
    } else {
      renameSync(path.join(dataDir, 'master.key'), path.join(work, 'master.key'));
      const noKey = await cli(['doctor']);
      assert.equal(noKey.code, 1);
      assert.match(noKey.output, /^fail\s+master key\s+.*master\.key is missing, yet DATA_DIR holds the embedded database.*Database checks skipped$/m);
      assert.doesNotMatch(noKey.output, /^ok\s+database/m, 'the installation was not opened (it would have made a new key)');
    }
  });

  it('makes no installation and no master key by mistake', { skip: TEST_DATABASE_URL ? 'the embedded database' : false }, async () => {
    // The key file is still away (the test before): a new key would open none of the installation's secrets.
    for (const args of [
      ['backup', '--out', path.join(work, 'keyless.tar.gz')],
      ['jobs', 'list'],
    ]) {
      const refused = await cli(args);
      assert.equal(refused.code, 1, refused.output);
      assert.match(refused.output, /master\.key is missing, yet DATA_DIR holds the embedded database/);
      assert.equal(existsSync(path.join(dataDir, 'master.key')), false, `${args[0]} made no key`);
    }
    renameSync(path.join(work, 'master.key'), path.join(dataDir, 'master.key'));

    const typo = path.join(work, 'dtaa');
    const backup = await cli(['backup', '--out', path.join(work, 'typo.tar.gz')], { DATA_DIR: typo });
    assert.equal(backup.code, 1);
    assert.equal(backup.output.trim(), `Cannot back up: DATA_DIR ${typo} holds no installation (no embedded database in it): check DATA_DIR`);
    const doctor = await cli(['doctor'], { DATA_DIR: typo });
    assert.equal(doctor.code, 1);
    assert.match(doctor.output, /^fail\s+installation\s+DATA_DIR .* holds no embedded database: check DATA_DIR/m);
    assert.equal(existsSync(typo), false, 'neither made the mistyped DATA_DIR');

    const nowhere = await cli(['backup', '--out', path.join(work, 'no-such-folder', 'x.tar.gz')]);
    assert.equal(nowhere.code, 1);
    assert.match(nowhere.output, /^Cannot back up: .*no-such-folder is not a folder: write the archive into an existing one$/m);

    // The first use of a new installation: its new key is logged on standard error, standard output is the answer alone.
    const created = await cli(['admin', 'create', '--email', 'first@example.com', '--username', 'first-admin', '--password-file', passwordFile], {
      DATA_DIR: path.join(work, 'second'),
    });
    assert.equal(created.code, 0, created.output);
    assert.match(created.output, /generated a new master key/);
    assert.match(created.stdout.trim(), /^Created subscription [0-9a-f-]+ \("first-admin"\) and its admin first-admin: user [0-9a-f-]+\.$/);
  });
});

describe('DATA_DIR and its control socket are the service user’s own', { timeout: 5 * 60_000 }, () => {
  const work = mkdtempSync(path.join(tmpdir(), 'rpc-data-dir-'));
  const passwordFile = path.join(work, 'password');
  const databases: ScratchDatabase[] = [];
  after(async () => {
    killLeftoverProcesses();
    for (const database of databases) await database.drop();
    rmSync(work, { recursive: true, force: true });
  });

  /** An installation's settings: a DATA_DIR, and on PostgreSQL a database of its own. */
  async function settings(dataDir: string): Promise<Record<string, string>> {
    const own = { DATA_DIR: dataDir, LOG_LEVEL: 'warn' };
    if (!TEST_DATABASE_URL) return own;
    const database = await createScratchDatabase(TEST_DATABASE_URL);
    databases.push(database);
    return { ...own, ...databaseEnv(database.url), MASTER_KEY: TEST_MASTER_KEY };
  }
  async function cli(args: string[], env: Record<string, string>): Promise<{ code: number | null; output: string }> {
    const child = runInProject(process.execPath, ['bin/rpc-service.js', ...args], env);
    const { code } = await child.exited(STEP_MS);
    return { code, output: `${child.stdout()}${child.stderr()}` };
  }
  const modeOf = (folder: string) => statSync(folder).mode & 0o777;

  it('makes DATA_DIR private, refuses to start on one other users may write, saying how to fix it, and doctor says the same', async () => {
    const dataDir = path.join(work, 'made', 'data');
    const port = await freePort();
    const env = { ...(await settings(dataDir)), PORT: String(port), HOST: '127.0.0.1' };
    const server = runInProject(process.execPath, ['bin/rpc-service.js', 'serve'], env);
    await whenHealthy(server, `http://127.0.0.1:${port}`);
    assert.equal(modeOf(dataDir), 0o700, 'the DATA_DIR the service made is private');
    server.child.kill('SIGTERM');
    assert.equal((await server.exited(STEP_MS)).code, 0, server.stderr());

    for (const [mode, who] of [
      [0o777, 'every user'],
      [0o770, 'its group'],
    ] as const) {
      chmodSync(dataDir, mode);
      const refused = runInProject(process.execPath, ['bin/rpc-service.js', 'serve'], env);
      assert.equal((await refused.exited(STEP_MS)).code, 1);
      assert.equal(
        refused.stderr().trim().split('\n').at(-1),
        `Cannot start: DATA_DIR cannot be used: ${dataDir} is writable by ${who} (mode 0${mode.toString(8)}), so another user could replace the files the service keeps there (its control socket among them): make it private with chmod 700 ${dataDir}`,
      );
      const doctor = await cli(['doctor'], env);
      assert.equal(doctor.code, 1, doctor.output);
      assert.match(doctor.output, new RegExp(`^fail\\s+DATA_DIR\\s+.* is writable by ${who} .*chmod 700 `, 'm'));
    }
    chmodSync(dataDir, 0o755);
    const doctor = await cli(['doctor'], env);
    assert.match(doctor.output, /^ok\s+DATA_DIR\s+.*: no other user may write it \(mode 755\)$/m, doctor.output);
  });

  it('sends nothing over a control socket another user owns, or in a DATA_DIR others may write', async () => {
    writeFileSync(passwordFile, `${PASSWORD}\n`);
    const dataDir = mkdtempSync(path.join(work, 'planted-'));
    const env = await settings(dataDir);
    const socketPath = path.join(dataDir, 'control.sock');
    // Another user's listener where the service's socket would be.
    let received = '';
    const planted = createServer((socket) => socket.on('data', (chunk) => (received += chunk.toString())));
    await new Promise<void>((resolve) => planted.listen(socketPath, resolve));
    try {
      const adminCreate = ['admin', 'create', '--email', 'victim@example.com', '--username', 'victim', '--password-file', passwordFile];
      chownSync(socketPath, 65534, 65534);
      const refused = await cli(adminCreate, env);
      assert.equal(refused.code, 1);
      assert.match(refused.output, /^Cannot create the admin: .*control\.sock belongs to uid 65534, neither this user \(uid 0\) nor root: .*nothing was sent/m);
      const doctor = await cli(['doctor'], env);
      assert.match(doctor.output, /^fail\s+DATA_DIR\s+.*control\.sock belongs to uid 65534/m);

      // The socket is this user's, but the folder lets anyone swap it between the check and the connection.
      chownSync(socketPath, 0, 0);
      chmodSync(dataDir, 0o777);
      const open = await cli(adminCreate, env);
      assert.equal(open.code, 1);
      assert.match(open.output, /^Cannot create the admin: the control socket cannot be trusted: .* is writable by every user/m);
      assert.equal(received, '', 'the password never reached the planted socket');
    } finally {
      await new Promise((resolve) => planted.close(resolve));
    }
  });
});
