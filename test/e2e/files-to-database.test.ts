import assert from 'node:assert/strict';
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { filesToDatabase } from '../../core/operator/files.ts';
import { createScratchDatabase, databaseEnv, type ScratchDatabase, TEST_DATABASE_URL } from '../support/database.ts';
import { startTestApp, TEST_MASTER_KEY, type TestApp } from '../support/harness.ts';
import { runInProject } from '../support/process.ts';

const PNG = Buffer.from('iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAChwGA60e6kgAAAABJRU5ErkJggg==', 'base64');

/**
 * An installation that kept its uploads on disk moves them into its database:
 * FILE_STORAGE=database, a restart (the files are still served, from disk),
 * then `rpc-service files to-database`.
 */
describe('rpc-service files to-database', { timeout: 5 * 60_000 }, () => {
  const dataDir = mkdtempSync(path.join(tmpdir(), 'rpc-files-'));
  let database: ScratchDatabase | undefined;
  let env: Record<string, string>;
  let storagePath = '';
  let fileId = '';
  let apiKey = '';

  const start = (fileStorage: 'disk' | 'database') =>
    startTestApp({
      persistent: true,
      dataDir,
      databaseUrl: database?.url,
      withNotes: false,
      plugins: ['auth', 'api-key', 'user-profile'],
      env: { FILE_STORAGE: fileStorage },
    });
  const download = async (t: TestApp) => {
    const response = await fetch(`${t.url}/api/files/${fileId}`, { headers: { 'x-api-key': apiKey } });
    assert.equal(response.status, 200);
    return Buffer.from(await response.arrayBuffer());
  };
  async function cli(fileStorage: string): Promise<{ code: number | null; output: string }> {
    const child = runInProject(process.execPath, ['bin/rpc-service.js', 'files', 'to-database'], { ...env, FILE_STORAGE: fileStorage });
    const { code } = await child.exited(120_000);
    return { code, output: `${child.stdout()}${child.stderr()}` };
  }

  before(async () => {
    if (TEST_DATABASE_URL) database = await createScratchDatabase(TEST_DATABASE_URL);
    env = { DATA_DIR: dataDir, LOG_LEVEL: 'warn', ...(database ? { ...databaseEnv(database.url), MASTER_KEY: TEST_MASTER_KEY } : {}) };
    const t = await start('disk');
    try {
      const owner = await t.signup();
      apiKey = (await t.as(owner).ApiKeyRpc.create({ description: 'reads the picture' })).fullKey;
      const { uploadUrl, uploadKey } = await t.as(owner).UserProfileRpc.getUploadKeyForProfilePicture();
      const uploaded = await fetch(uploadUrl, { method: 'PUT', headers: { authorization: `Bearer ${owner.token}`, 'content-type': 'image/png' }, body: PNG });
      fileId = (await uploaded.json()).data.files[0].fileId;
      await t.as(owner).UserProfileRpc.updateProfilePicture({ uploadKey });
      storagePath = `${owner.subscriptionId}/${fileId}`;
      assert.ok(existsSync(path.join(dataDir, 'files', storagePath)), 'kept on disk');
    } finally {
      await t.close();
    }
  });
  after(async () => {
    await database?.drop();
    rmSync(dataDir, { recursive: true, force: true });
  });

  it('is refused while the installation keeps its files on disk', async () => {
    const refused = await cli('disk');
    assert.equal(refused.code, 1);
    assert.equal(
      refused.output.trim(),
      'Cannot move the files: FILE_STORAGE is not database: set FILE_STORAGE=database (and restart the service with it) first',
    );
  });

  it('serves the files from disk until they are moved, then from the database, and a second run has nothing to move', async () => {
    const t = await start('database');
    try {
      assert.ok((await download(t)).equals(PNG), 'read from disk before the move');
      const moved = await filesToDatabase.run(t.app, {}, () => undefined);
      assert.deepEqual(moved, { moved: 1, bytes: PNG.length, already: 0, missing: 0 });
      assert.equal(existsSync(path.join(dataDir, 'files', storagePath)), false, 'gone from disk');
      assert.ok((await download(t)).equals(PNG), 'read from the database after it');
    } finally {
      await t.close();
    }
    const again = await cli('database');
    assert.equal(again.code, 0, again.output);
    assert.equal(again.output.trim(), 'Moved 0 files (0 B) into the database; 1 already there.');
  });
});
