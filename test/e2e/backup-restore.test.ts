import assert from 'node:assert/strict';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import * as tar from 'tar';
import { createScratchDatabase, databaseEnv, type ScratchDatabase, TEST_DATABASE_URL } from '../support/database.ts';
import { TEST_MASTER_KEY } from '../support/harness.ts';
import { freePort, killLeftoverProcesses, runInProject, runServer, whenHealthy, type RunningProcess } from '../support/process.ts';

/**
 * The operator's backup and restore, as processes: the service started as
 * `npm start` starts it, `rpc-service backup` taken while it serves (on the
 * embedded database, through its control socket), the service stopped,
 * `rpc-service restore` into an empty installation, and the restored service
 * answering the same reads with the same credentials. On PostgreSQL
 * (TEST_DATABASE_URL) the same with pg_dump into a second database.
 */
const PNG = Buffer.from('iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAChwGA60e6kgAAAABJRU5ErkJggg==', 'base64');
const PASSWORD = 'a long enough password';
const STEP_MS = 120_000;

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

  /** `rpc-service <args>` as the operator types it: its exit code and output. */
  async function cli(where: Installation, ...args: string[]): Promise<{ code: number | null; output: string }> {
    const child = runInProject(process.execPath, ['bin/rpc-service.js', ...args], where.env);
    const { code } = await child.exited(STEP_MS);
    return { code, output: `${child.stdout()}${child.stderr()}` };
  }

  async function rpc(method: string, params: object, headers: Record<string, string> = {}): Promise<any> {
    const response = await fetch(`${base}/api/rpc`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', ...headers },
      body: JSON.stringify({ method, params }),
    });
    const body = await response.json();
    assert.equal(body.success, true, `${method}: ${JSON.stringify(body)}`);
    return body.data;
  }

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
  const kept: { token?: string; apiKey?: string; fileId?: string; email?: string } = {};

  it('backs up an installation while it serves', async () => {
    await start(source);
    const signup = await rpc('AuthRpc.signup', { email: 'owner@example.com', username: 'owner', password: PASSWORD, subscriptionName: 'Acme' });
    kept.email = signup.user.email;
    const auth = { authorization: `Bearer ${signup.token}` };
    kept.apiKey = (await rpc('ApiKeyRpc.create', { description: 'survives a restore' }, auth)).fullKey;
    await rpc('SecretsRpc.create', { zone: 'ops', key: 'DEPLOY_TOKEN', value: 'the secret value', description: 'kept sealed' }, auth);
    const { uploadUrl, uploadKey } = await rpc('UserProfileRpc.getUploadKeyForProfilePicture', {}, auth);
    const uploaded = await fetch(uploadUrl, { method: 'PUT', headers: { ...auth, 'content-type': 'image/png' }, body: PNG });
    kept.fileId = (await uploaded.json()).data.files[0].fileId;
    await rpc('UserProfileRpc.updateProfilePicture', { uploadKey }, auth);
    await rpc('CheckpointRpc.writeFile', { scope: 'site', path: 'index.html', content: '<h1>Acme</h1>' }, auth);
    await rpc('CheckpointRpc.createCheckpoint', { scope: 'site', message: 'first page' }, auth);

    const started = Date.now();
    const { code, output } = await cli(source, 'backup', '--out', archive);
    assert.equal(code, 0, output);
    assert.match(output, TEST_DATABASE_URL ? /holds no master key: a restore needs the same MASTER_KEY/ : /It holds the master key/);
    console.log(`# backup: ${statSync(archive).size} bytes in ${Date.now() - started} ms (the command's process included)`);
    const names: string[] = [];
    await tar.list({ file: archive, onReadEntry: (entry) => void names.push(entry.path) });
    assert.ok(names.includes('manifest.json'));
    assert.ok(names.includes(TEST_DATABASE_URL ? 'database/postgresql.dump' : 'database/embedded.tar.gz'));
    // On PostgreSQL the files are kept in the database (FILE_STORAGE's default there), so the dump holds them; checkpoint scopes are in the database on both.
    assert.equal(
      names.some((name) => name.startsWith('data/files/')),
      !TEST_DATABASE_URL,
      `the uploaded file: ${names.join(', ')}`,
    );
    assert.equal(names.includes('keys/master.key'), !TEST_DATABASE_URL);
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
    writeFileSync(path.join(unpacked, altered), 'not the database');
    const refused = await cli(target, 'restore', '--from', await repack('altered.tar.gz'));
    assert.equal(refused.code, 1);
    assert.match(refused.output, /does not match its checksum/);
  });

  it('restores into an empty installation that answers the same reads with the same credentials', async () => {
    const started = Date.now();
    const { code, output } = await cli(target, 'restore', '--from', archive);
    assert.equal(code, 0, output);
    console.log(`# restore: ${Date.now() - started} ms (the command's process included)`);
    await start(target);
    const session = await rpc('AuthRpc.login', { identifier: 'owner', password: PASSWORD });
    assert.equal(session.user.email, kept.email);
    const viaKey = { 'x-api-key': kept.apiKey! };
    assert.equal((await rpc('AuthRpc.getSession', {}, viaKey)).user.email, kept.email);
    assert.equal((await rpc('SecretsRpc.getSecretValue', { zone: 'ops', key: 'DEPLOY_TOKEN' }, viaKey)).value, 'the secret value');
    const file = await fetch(`${base}/api/files/${kept.fileId}`, { headers: viaKey });
    assert.equal(file.status, 200);
    assert.deepEqual(Buffer.from(await file.arrayBuffer()), PNG);
    assert.equal((await rpc('CheckpointRpc.readFile', { scope: 'site', path: 'index.html' }, viaKey)).content, '<h1>Acme</h1>');
    assert.equal((await rpc('CheckpointRpc.listCheckpoints', { scope: 'site' }, viaKey))[0]?.message.trim(), 'first page');
    await stop();
  });
});
