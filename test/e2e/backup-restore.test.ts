import assert from 'node:assert/strict';
import { copyFileSync, mkdirSync, mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import * as tar from 'tar';
import { CORE_VERSION } from '../../core/base/version.ts';
import { callerAt, refused, type Credential } from '../support/caller.ts';
import { createScratchDatabase, databaseEnv, type ScratchDatabase, TEST_DATABASE_URL } from '../support/database.ts';
import { TEST_MASTER_KEY } from '../support/harness.ts';
import { freePort, killLeftoverProcesses, runInProject, runServer, whenHealthy, type RunningProcess } from '../support/process.ts';

/**
 * The operator's backup and restore, as processes: the service started as
 * `npm start` starts it, `rpc-service backup` taken while it serves (on the
 * embedded database, through its control socket), the service stopped,
 * `rpc-service restore` into an empty installation, and the restored service
 * answering the same reads with the same credentials; then a backup without
 * its master key restored with --force over that installation. On PostgreSQL
 * (TEST_DATABASE_URL) the same with pg_dump into a second database.
 */
const PNG = Buffer.from('iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAChwGA60e6kgAAAABJRU5ErkJggg==', 'base64');
const PASSWORD = 'a long enough password';
const STEP_MS = 120_000;
/** Node flags under which the command's standard error passes for a terminal, so it draws its progress bars as it would on one. */
const ON_A_TERMINAL = ['--import', 'data:text/javascript,Object.defineProperty(process.stderr,"isTTY",{value:true})'];

/** The bars of these stages were drawn, each to its end. */
function drewBars(output: string, ...labels: string[]): void {
  for (const label of labels) assert.match(output, new RegExp(`${label}\\s+\\[[^\\]]*\\] 100% \\S+`), `a ${label} bar in: ${output}`);
}

interface Installation {
  env: Record<string, string>;
  dataDir: string;
}

describe('rpc-service backup and restore', { timeout: 10 * 60_000 }, () => {
  const work = mkdtempSync(path.join(tmpdir(), 'rpc-backup-'));
  const databases: ScratchDatabase[] = [];
  let source: Installation;
  let target: Installation;
  let server: RunningProcess | undefined;
  let base = '';

  async function installation(name: string): Promise<Installation> {
    const dataDir = path.join(work, name);
    if (!TEST_DATABASE_URL) return { dataDir, env: { DATA_DIR: dataDir } };
    const database = await createScratchDatabase(TEST_DATABASE_URL);
    databases.push(database);
    return { dataDir, env: { DATA_DIR: dataDir, ...databaseEnv(database.url), MASTER_KEY: TEST_MASTER_KEY } };
  }

  async function start(where: Installation): Promise<void> {
    const port = await freePort();
    base = `http://127.0.0.1:${port}`;
    server = runServer({ ...where.env, PORT: String(port), LOG_LEVEL: 'warn' });
    await whenHealthy(server, base, 90_000);
  }

  async function stop(): Promise<void> {
    server!.child.kill('SIGTERM');
    assert.equal((await server!.exited(30_000)).code, 0);
    server = undefined;
  }

  /** `rpc-service <args>` as the operator types it on a terminal: its exit code and output. */
  async function cli(where: Installation, ...args: string[]): Promise<{ code: number | null; output: string }> {
    const child = runInProject(process.execPath, [...ON_A_TERMINAL, 'bin/rpc-service.js', ...args], where.env);
    const { code } = await child.exited(STEP_MS);
    return { code, output: `${child.stdout()}${child.stderr()}` };
  }

  /** Operations called on the installation now serving, over HTTP. */
  const at = (who: Credential | null) => callerAt(base, who);

  before(async () => {
    source = await installation('source');
    target = await installation('target');
  });
  after(async () => {
    killLeftoverProcesses();
    for (const database of databases) await database.drop();
    rmSync(work, { recursive: true, force: true });
  });

  const archive = path.join(work, 'backup.tar.gz');
  const keyless = path.join(work, 'keyless.tar.gz');
  const kept: { token?: string; apiKey?: string; fileId?: string; email?: string } = {};

  /**
   * The source's reads, answered by the installation now serving: its password,
   * a session and an API key made before the backup, a secret, a file, a checkpoint.
   */
  async function answersAsTheSourceDid(): Promise<void> {
    const session = await at(null).AuthRpc.login({ identifier: 'owner', password: PASSWORD });
    assert.equal(session.user.email, kept.email);
    assert.equal((await at({ token: kept.token! }).AuthRpc.getSession()).user.email, kept.email, 'the session made before the backup');
    const viaKey = at({ apiKey: kept.apiKey! });
    assert.equal((await viaKey.AuthRpc.getSession()).user.email, kept.email);
    assert.equal((await viaKey.SecretsRpc.getSecretValue({ zone: 'ops', key: 'DEPLOY_TOKEN' })).value, 'the secret value');
    const file = await fetch(`${base}/api/files/${kept.fileId}`, { headers: { 'x-api-key': kept.apiKey! } });
    assert.equal(file.status, 200);
    assert.deepEqual(Buffer.from(await file.arrayBuffer()), PNG);
    assert.equal((await viaKey.CheckpointRpc.readFile({ scope: 'site', path: 'index.html' })).content, '<h1>Acme</h1>');
    assert.equal((await viaKey.CheckpointRpc.listCheckpoints({ scope: 'site' }))[0]?.message.trim(), 'first page');
  }

  it('backs up an installation while it serves', async () => {
    await start(source);
    const signup = await at(null).AuthRpc.signup({ email: 'owner@example.com', username: 'owner', password: PASSWORD });
    kept.email = signup.user.email;
    kept.token = signup.token;
    const owner = at(signup);
    kept.apiKey = (await owner.ApiKeyRpc.create({ description: 'survives a restore' })).fullKey;
    await owner.SecretsRpc.create({ zone: 'ops', key: 'DEPLOY_TOKEN', value: 'the secret value', description: 'kept sealed' });
    const { uploadUrl, uploadKey } = await owner.UserProfileRpc.getUploadKeyForProfilePicture();
    const uploaded = await fetch(uploadUrl, { method: 'PUT', headers: { authorization: `Bearer ${signup.token}`, 'content-type': 'image/png' }, body: PNG });
    kept.fileId = (await uploaded.json()).data.files[0].fileId;
    await owner.UserProfileRpc.updateProfilePicture({ uploadKey });
    await owner.CheckpointRpc.writeFile({ scope: 'site', path: 'index.html', content: '<h1>Acme</h1>' });
    await owner.CheckpointRpc.createCheckpoint({ scope: 'site', message: 'first page' });

    const started = Date.now();
    const { code, output } = await cli(source, 'backup', '--out', archive);
    assert.equal(code, 0, output);
    assert.match(output, TEST_DATABASE_URL ? /holds no master key: a restore needs the same MASTER_KEY/ : /It holds the master key/);
    console.log(`# backup: ${statSync(archive).size} bytes in ${Date.now() - started} ms (the command's process included)`);
    // Drawn here from the serving process's progress, forwarded over the control socket.
    drewBars(output, 'database', 'packing');
    const names: string[] = [];
    await tar.list({ file: archive, onReadEntry: (entry) => void names.push(entry.path) });
    await tar.extract({ file: archive, cwd: work }, ['manifest.json']);
    const manifest = JSON.parse(readFileSync(path.join(work, 'manifest.json'), 'utf8'));
    // Built-in plugins are of the service's version.
    assert.deepEqual(
      manifest.plugins.find((plugin: { id: string }) => plugin.id === 'auth'),
      { id: 'auth', version: CORE_VERSION },
    );
    assert.ok(names.includes('manifest.json'));
    assert.ok(names.includes(TEST_DATABASE_URL ? 'database/postgresql.dump' : 'database/embedded.tar.gz'));
    // On PostgreSQL the files are kept in the database (FILE_STORAGE's default there), so the dump holds them; checkpoint scopes are in the database on both.
    assert.equal(
      names.some((name) => name.startsWith('data/files/')),
      !TEST_DATABASE_URL,
      `the uploaded file: ${names.join(', ')}`,
    );
    assert.equal(names.includes('keys/master.key'), !TEST_DATABASE_URL);

    const withoutKey = await cli(source, 'backup', '--out', keyless, '--without-master-key');
    assert.equal(withoutKey.code, 0, withoutKey.output);
    // What a restore needs: on the embedded database the key file, with PostgreSQL the MASTER_KEY the archive never holds.
    assert.match(
      withoutKey.output,
      TEST_DATABASE_URL
        ? /It holds no master key: a restore needs the same MASTER_KEY\./
        : /It holds no master key: a restore needs this installation's \S+\/source\/master\.key in the target's DATA_DIR first/,
    );
    const keylessNames: string[] = [];
    await tar.list({ file: keyless, onReadEntry: (entry) => void keylessNames.push(entry.path) });
    assert.ok(!keylessNames.includes('keys/master.key'), keylessNames.join(', '));
  });

  it('refuses to restore while the service serves that installation, or into one in use', async () => {
    const running = await cli(source, 'restore', '--from', archive);
    assert.equal(running.code, 1);
    assert.match(running.output, /the service is running on .*: stop it first/);
    await stop();
    const used = await cli(source, 'restore', '--from', archive);
    assert.equal(used.code, 1);
    assert.match(used.output, /already holds an installation.*--force/);
  });

  it('refuses an archive of a newer format or with an altered entry', async () => {
    const unpacked = path.join(work, 'unpacked');
    rmSync(unpacked, { recursive: true, force: true });
    mkdirSync(unpacked);
    await tar.extract({ file: archive, cwd: unpacked });
    const manifestFile = path.join(unpacked, 'manifest.json');
    const manifest = JSON.parse(readFileSync(manifestFile, 'utf8'));
    const repack = async (name: string) => {
      await tar.create({ gzip: true, cwd: unpacked, file: path.join(work, name) }, [
        'manifest.json',
        ...manifest.entries.map((entry: { path: string }) => entry.path),
      ]);
      return path.join(work, name);
    };
    writeFileSync(manifestFile, JSON.stringify({ ...manifest, format: 99 }));
    const newer = await cli(target, 'restore', '--from', await repack('newer.tar.gz'));
    assert.equal(newer.code, 1);
    assert.match(newer.output, /backup format 99, newer than this version reads/);
    writeFileSync(manifestFile, JSON.stringify(manifest));
    const altered = manifest.entries.find((entry: { path: string }) => entry.path.startsWith('database/')).path;
    // As long as it was: only its checksum tells it apart.
    writeFileSync(path.join(unpacked, altered), Buffer.alloc(statSync(path.join(unpacked, altered)).size, 'x'));
    const refused = await cli(target, 'restore', '--from', await repack('altered.tar.gz'));
    assert.equal(refused.code, 1);
    assert.match(refused.output, /does not match its checksum/);
  });

  it('restores into an empty installation that answers the same reads with the same credentials', async () => {
    const started = Date.now();
    const { code, output } = await cli(target, 'restore', '--from', archive);
    assert.equal(code, 0, output);
    console.log(`# restore: ${Date.now() - started} ms (the command's process included)`);
    drewBars(output, 'unpacking', 'database');
    await start(target);
    await answersAsTheSourceDid();
    // Made on the target alone: the restore with --force below replaces it.
    await at({ apiKey: kept.apiKey! }).SecretsRpc.create({ zone: 'ops', key: 'ONLY_ON_TARGET', value: 'replaced by --force' });
    await stop();
  });

  it('restores a backup without its master key only with that key, and with --force over an installation', async () => {
    if (TEST_DATABASE_URL) {
      const { MASTER_KEY: _, ...withoutKey } = target.env;
      const refused = await cli({ ...target, env: withoutKey }, 'restore', '--from', keyless, '--force');
      assert.equal(refused.code, 1);
      assert.match(refused.output, /^Cannot restore: \S+ was made with MASTER_KEY: set the same MASTER_KEY to restore it$/m);
    } else {
      rmSync(path.join(target.dataDir, 'master.key'));
      const refused = await cli(target, 'restore', '--from', keyless, '--force');
      assert.equal(refused.code, 1);
      assert.match(
        refused.output,
        /^Cannot restore: \S+ holds no master key \(it was made with --without-master-key\): put the installation's master\.key into \S+\/target first$/m,
      );
      copyFileSync(path.join(source.dataDir, 'master.key'), path.join(target.dataDir, 'master.key'));
    }
    const { code, output } = await cli(target, 'restore', '--from', keyless, '--force');
    assert.equal(code, 0, output);
    await start(target);
    await answersAsTheSourceDid();
    await refused(
      at({ apiKey: kept.apiKey! }).SecretsRpc.getSecretValue({ zone: 'ops', key: 'ONLY_ON_TARGET' }),
      'NOT_FOUND',
      'what the target held before is gone',
    );
    await stop();
  });
});
