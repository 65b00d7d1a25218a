import assert from 'node:assert/strict';
import { existsSync, mkdtempSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { createScratchDatabase, databaseEnv, type ScratchDatabase, TEST_DATABASE_URL } from '../support/database.ts';
import { NOTES_PLUGIN } from '../support/harness.ts';
import { freePort, killLeftoverProcesses, runInProject, runServer, whenHealthy, type RunningProcess } from '../support/process.ts';
import { callerAt, refused, type Credential } from '../support/caller.ts';

/**
 * One tenant moved between two installations, as the operator does it: both
 * services running (`npm start`), `rpc-service tenant export` on the source,
 * `tenant import` on the target (through each one's control socket on the
 * embedded database), and the same reads answered alike by both, with the
 * same credentials. The target has master keys of its own; a third-party
 * plugin (the notes example, from PLUGINS) moves its records too.
 */
const PNG = Buffer.from('iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAChwGA60e6kgAAAABJRU5ErkJggg==', 'base64');
const STEP_MS = 120_000;

interface Node {
  env: Record<string, string>;
  base: string;
  server: RunningProcess;
}

describe('rpc-service tenant export and import', { timeout: 10 * 60_000 }, () => {
  const work = mkdtempSync(path.join(tmpdir(), 'rpc-tenant-'));
  const databases: ScratchDatabase[] = [];
  let source: Node;
  let target: Node;

  /** The target keeps files in its database, the source on disk (on PostgreSQL, where that is the default, both in the database): the files move whatever each keeps. */
  async function start(name: string, masterKey: string, fileStorage: 'disk' | 'database'): Promise<Node> {
    const env: Record<string, string> = {
      DATA_DIR: path.join(work, name),
      PLUGINS: NOTES_PLUGIN,
      LOG_LEVEL: 'warn',
      SIGNUP_IP_LIMIT: '1000',
      ...(TEST_DATABASE_URL ? {} : { FILE_STORAGE: fileStorage }),
    };
    if (TEST_DATABASE_URL) {
      const database = await createScratchDatabase(TEST_DATABASE_URL);
      databases.push(database);
      Object.assign(env, { ...databaseEnv(database.url), MASTER_KEY: masterKey });
    }
    const port = await freePort();
    const base = `http://127.0.0.1:${port}`;
    const server = runServer({ ...env, PORT: String(port) });
    await whenHealthy(server, base, 90_000);
    return { env, base, server };
  }

  async function cli(node: Node, ...args: string[]): Promise<{ code: number | null; output: string }> {
    const child = runInProject(process.execPath, ['bin/rpc-service.js', ...args], node.env);
    const { code } = await child.exited(STEP_MS);
    return { code, output: `${child.stdout()}${child.stderr()}` };
  }

  /** Operations called on a node over HTTP, as `who` (anonymously by default). */
  const on = (node: Node, who: Credential | null = null) => callerAt(node.base, who);

  before(async () => {
    [source, target] = await Promise.all([
      start('source', Buffer.alloc(32, 1).toString('base64'), 'disk'),
      start('target', Buffer.alloc(32, 2).toString('base64'), 'database'),
    ]);
  });
  after(async () => {
    killLeftoverProcesses();
    for (const database of databases) await database.drop();
    rmSync(work, { recursive: true, force: true });
  });

  const archive = path.join(work, 'acme.tar.gz');
  let session: { token: string };
  let apiKey: { apiKey: string };
  let subscriptionId: string;
  let strangerId: string;
  let fileId: string;

  /** Reads a user of the tenant makes, answered by an installation; their answers must not depend on which one (none is audited: that would add to the audit log read beside it). */
  const reads = (node: Node) =>
    Promise.all([
      on(node, session).AuthRpc.getSession(),
      on(node, apiKey).UserProfileRpc.getUserProfile(),
      on(node, session).ApiKeyRpc.getData(),
      on(node, session).SecretsRpc.getAuditLog(),
      on(node, apiKey).TaskRpc.getData({ taskInstanceId: 'board' }),
      on(node, apiKey).DocumentRpc.getAllDocuments({ documentInstanceId: 'handbook' }),
      on(node, apiKey).CheckpointRpc.listCheckpoints({ scope: 'site' }),
      on(node, apiKey).CheckpointRpc.readFile({ scope: 'site', path: 'index.html' }),
      on(node, apiKey).call('NoteRpc.list'),
      fetch(`${node.base}/api/files/${fileId}`, { headers: { 'x-api-key': apiKey.apiKey } }).then(async (response) => [
        response.status,
        Buffer.from(await response.arrayBuffer()).toString('base64'),
      ]),
    ]);

  it('exports a tenant from a running installation', async () => {
    const signup = await on(source).AuthRpc.signup({
      email: 'owner@acme.example',
      username: 'acme-owner',
      password: 'a long enough password',
    });
    subscriptionId = signup.user.subscriptionId;
    session = signup;
    apiKey = { apiKey: (await on(source, session).ApiKeyRpc.create({ description: 'moves along' })).fullKey };
    await on(source, session).SecretsRpc.create({ zone: 'ops', key: 'DEPLOY_TOKEN', value: 'the secret value' });
    await on(source, session).SecretsRpc.getSecretValue({ zone: 'ops', key: 'DEPLOY_TOKEN' });
    const byKey = on(source, apiKey);
    await byKey.TaskRpc.create({ taskInstanceId: 'board', title: 'Move the tenant' });
    await byKey.DocumentRpc.create({ documentInstanceId: 'handbook', title: 'Welcome', content: 'Hello' });
    await byKey.CheckpointRpc.writeFile({ scope: 'site', path: 'index.html', content: '<h1>Acme</h1>' });
    await byKey.CheckpointRpc.createCheckpoint({ scope: 'site', message: 'first page' });
    await byKey.call('NoteRpc.add', { text: 'a note of a third-party plugin' });
    const { uploadUrl, uploadKey } = await byKey.UserProfileRpc.getUploadKeyForProfilePicture();
    const uploaded = await fetch(uploadUrl, { method: 'PUT', headers: { 'x-api-key': apiKey.apiKey, 'content-type': 'image/png' }, body: PNG });
    fileId = (await uploaded.json()).data.files[0].fileId;
    await byKey.UserProfileRpc.updateProfilePicture({ uploadKey });
    const stranger = await on(source).AuthRpc.signup({ email: 'other@example.com', username: 'other-owner', password: 'a long enough password' });
    strangerId = stranger.user.subscriptionId;

    const { code, output } = await cli(source, 'tenant', 'export', '--subscription', subscriptionId, '--out', archive);
    assert.equal(code, 0, output);
    assert.ok(statSync(`${archive}.key`).mode % 0o1000 === 0o600, 'the transfer key is for its owner only');
    console.log(`# tenant export: ${statSync(archive).size} bytes; ${output.trim()}`);
  });

  it('is not mistaken for a backup: restore refuses it and leaves no folder behind', async () => {
    const fresh = path.join(work, 'restored-from-export');
    const refused = await cli({ ...target, env: { ...target.env, DATA_DIR: fresh } }, 'restore', '--from', archive);
    assert.equal(refused.code, 1);
    assert.equal(refused.output.trim(), `Cannot restore: ${archive} is a tenant export: add it with rpc-service tenant import`);
    assert.equal(existsSync(fresh), false, 'the refused restore made no DATA_DIR');
  });

  it('refuses an import without the transfer key that opens it', async () => {
    const wrongKey = path.join(work, 'wrong.key');
    writeFileSync(wrongKey, `${Buffer.alloc(32, 9).toString('base64url')}\n`);
    const wrong = await cli(target, 'tenant', 'import', '--from', archive, '--key-file', wrongKey);
    assert.equal(wrong.code, 1);
    assert.match(wrong.output, /does not open the data keys/);
    await refused(on(target, session).AuthRpc.getSession(), 'UNAUTHENTICATED', 'nothing was imported');
  });

  it('imports it into another installation, which answers the same reads with the same credentials', async () => {
    const { code, output } = await cli(target, 'tenant', 'import', '--from', archive);
    assert.equal(code, 0, output);
    assert.deepEqual(await reads(target), await reads(source));
    assert.equal(
      (await on(target, apiKey).SecretsRpc.getSecretValue({ zone: 'ops', key: 'DEPLOY_TOKEN' })).value,
      'the secret value',
      "opened by the target's keys",
    );
    const login = await on(target).AuthRpc.login({ identifier: 'acme-owner', password: 'a long enough password' });
    assert.equal(login.user.subscriptionId, subscriptionId);
    await refused(on(target).AuthRpc.login({ identifier: 'other-owner', password: 'a long enough password' }), 'UNAUTHENTICATED', 'only the one tenant moved');
    assert.notEqual(strangerId, subscriptionId);
    const again = await cli(target, 'tenant', 'import', '--from', archive);
    assert.equal(again.code, 1);
    assert.match(again.output, /already exists in this installation/);
  });
});
