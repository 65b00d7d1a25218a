import assert from 'node:assert/strict';
import { randomBytes, randomUUID } from 'node:crypto';
import { mkdtempSync, readFileSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { gcmOpen, gcmSeal } from '../../core/credentials/crypto.ts';
import { Keyring } from '../../core/credentials/keyring.ts';
import { resolveMasterKeys } from '../../core/credentials/master-key.ts';
import { refused } from '../support/caller.ts';
import { createScratchDatabase, databaseEnv, type ScratchDatabase, TEST_DATABASE_URL } from '../support/database.ts';
import { startTestApp, type TestApp } from '../support/harness.ts';
import { killLeftoverProcesses, runInProject } from '../support/process.ts';

const newKey = () => randomBytes(32).toString('base64');

/** `npm run cli -- rotate-master-key` with the given environment. */
async function rotate(env: Record<string, string>) {
  const cli = runInProject(process.execPath, ['--import', 'tsx', 'core/cli/cli.ts', 'rotate-master-key'], env);
  const { code } = await cli.exited(60_000);
  return { code, stdout: cli.stdout(), stderr: cli.stderr() };
}

describe('Keyring: envelope encryption per subscription', () => {
  let t: TestApp;
  before(async () => (t = await startTestApp({ withNotes: false, plugins: ['auth'] })));
  after(() => t.close());

  it('seals with the data key of the subscription and opens only for it', async () => {
    const { keyring } = t.app.deps;
    const [a, b] = [randomUUID(), randomUUID()];
    const sealed = await keyring.seal(a, 'sk_live_value');
    assert.match(sealed, /^k1\.[0-9a-f-]{36}\.[\w-]+\.[\w-]+\.[\w-]+$/);
    assert.ok(!sealed.includes('sk_live_value'));
    assert.notEqual(await keyring.seal(a, 'sk_live_value'), sealed, 'a fresh IV every time');
    assert.equal(await keyring.open(a, sealed), 'sk_live_value');
    await assert.rejects(keyring.open(b, sealed), /another subscription|does not have/);

    const tampered = sealed.slice(0, -2) + (sealed.endsWith('A') ? 'BB' : 'AA');
    await assert.rejects(keyring.open(a, tampered));
    await assert.rejects(keyring.open(a, 'k1.not-a-uuid.x.y.z'), /does not have/);
    await assert.rejects(keyring.open(a, 'v1.plain'), /Not a value sealed by the keyring/);

    const rows = await t.app.deps.db.execute<{ subscription_id: string; wraps: unknown }>(
      'select subscription_id, wraps from core_data_key where subscription_id in (?, ?)',
      [a, b],
    );
    assert.deepEqual(
      rows.map((row) => row.subscription_id),
      [a],
      'a data key is made on first use only',
    );
    const wraps = typeof rows[0]!.wraps === 'string' ? JSON.parse(rows[0]!.wraps) : rows[0]!.wraps;
    assert.deepEqual(Object.keys(wraps), [t.app.deps.keyring.masterKeyId]);
  });

  it('authenticates the associated data: the same key and ciphertext under another subscription id do not open', () => {
    const key = Buffer.alloc(32, 9);
    const sealed = gcmSeal(key, 'bound value', 'subscription-a');
    assert.equal(gcmOpen(key, sealed, 'subscription-a').toString('utf8'), 'bound value');
    assert.throws(() => gcmOpen(key, sealed, 'subscription-b'));
    assert.throws(() => gcmOpen(key, sealed));
  });

  it('binds each wrapped data key to its row: a wrap copied to another subscription does not open', async () => {
    const { keyring, db } = t.app.deps;
    const [a, b] = [randomUUID(), randomUUID()];
    await keyring.seal(a, 'value of a');
    const sealedForB = await keyring.seal(b, 'value of b');
    await db.execute('update core_data_key set wraps = (select wraps from core_data_key where subscription_id = ?) where subscription_id = ?', [a, b]);
    // A node that has not cached b's data key reads the row as it is now.
    const fresh = new Keyring({ db, keys: resolveMasterKeys(t.app.config, t.app.logger) });
    await assert.rejects(fresh.open(b, sealedForB));
  });
});

describe('rotate-master-key', () => {
  after(killLeftoverProcesses);

  it('with MASTER_KEY: wraps every data key under the new key while the service keeps serving', async () => {
    const oldKey = newKey();
    const nextKey = newKey();
    const dataDir = mkdtempSync(path.join(tmpdir(), 'rpc-rotate-'));
    let scratch: ScratchDatabase | undefined;
    const databaseUrl = TEST_DATABASE_URL ? (scratch = await createScratchDatabase(TEST_DATABASE_URL)).url : undefined;
    const shared = { dataDir, persistent: true, withNotes: false, plugins: ['auth', 'secrets'], ...(databaseUrl ? { databaseUrl } : {}) };
    const start = (env: Record<string, string>) => startTestApp({ ...shared, env });
    try {
      const before = await start({ MASTER_KEY: oldKey });
      const subscriptions = [randomUUID(), randomUUID(), randomUUID()];
      const sealed = await Promise.all(subscriptions.map((id) => before.app.deps.keyring.seal(id, `secret of ${id}`)));
      const admin = await before.signup();
      await before.as(admin).SecretsRpc.create({ zone: 'production', key: 'DB_PASSWORD', value: 'through the API' });
      const readSecret = (t: TestApp) => t.as(admin).SecretsRpc.getSecretValue({ zone: 'production', key: 'DB_PASSWORD' });
      // The embedded database takes one process at a time; PostgreSQL serves on during the rotation.
      if (!databaseUrl) await before.close();

      const env = { DATA_DIR: dataDir, MASTER_KEY: nextKey, MASTER_KEY_PREVIOUS: oldKey, ...(databaseUrl ? databaseEnv(databaseUrl) : {}) };
      const rotated = await rotate(env);
      assert.equal(rotated.code, 0, rotated.stderr);
      assert.match(rotated.stdout, /4 data key\(s\) wrapped again, 0 already under it/);
      assert.match(rotated.stdout, /Remove MASTER_KEY_PREVIOUS/);
      if (databaseUrl) {
        // Still serving, with the old key: the data keys it holds have not changed.
        for (const [index, id] of subscriptions.entries()) assert.equal(await before.app.deps.keyring.open(id, sealed[index]!), `secret of ${id}`);
        await before.close();
      }

      const again = await rotate(env);
      assert.match(again.stdout, /0 data key\(s\) wrapped again, 4 already under it/);

      const onlyNew = await start({ MASTER_KEY: nextKey });
      for (const [index, id] of subscriptions.entries()) assert.equal(await onlyNew.app.deps.keyring.open(id, sealed[index]!), `secret of ${id}`);
      assert.equal((await readSecret(onlyNew)).value, 'through the API');
      await onlyNew.close();

      const onlyOld = await start({ MASTER_KEY: oldKey });
      await assert.rejects(onlyOld.app.deps.keyring.open(subscriptions[0]!, sealed[0]!), /none of them configured/);
      await refused(readSecret(onlyOld), 'INTERNAL');
      await onlyOld.close();
    } finally {
      await scratch?.drop();
      rmSync(dataDir, { recursive: true, force: true });
    }
  });

  it('embedded database without MASTER_KEY: a new key in master.key, refused while the service runs', { skip: !!TEST_DATABASE_URL }, async () => {
    const dataDir = mkdtempSync(path.join(tmpdir(), 'rpc-rotate-'));
    try {
      const running = await startTestApp({ dataDir, persistent: true, withNotes: false, plugins: ['auth'] });
      const id = randomUUID();
      const sealed = await running.app.deps.keyring.seal(id, 'embedded secret');
      const file = path.join(dataDir, 'master.key');
      const keyBefore = readFileSync(file, 'utf8');

      const refused = await rotate({ DATA_DIR: dataDir });
      assert.equal(refused.code, 1);
      assert.match(refused.stderr, /^Cannot rotate the master key: the embedded database is in use/);
      assert.equal(readFileSync(file, 'utf8'), keyBefore);
      await running.close();

      const rotated = await rotate({ DATA_DIR: dataDir });
      assert.equal(rotated.code, 0, rotated.stderr);
      assert.match(rotated.stdout, /^New master key [0-9a-f]{12} in .*master\.key: 1 data key\(s\) wrapped again/);
      const keyAfter = readFileSync(file, 'utf8');
      assert.notEqual(keyAfter, keyBefore);
      assert.equal(keyAfter.trim().split('\n').length, 1, 'only the new key stays');
      assert.equal(statSync(file).mode & 0o777, 0o600);

      const restarted = await startTestApp({ dataDir, persistent: true, withNotes: false, plugins: ['auth'] });
      assert.equal(await restarted.app.deps.keyring.open(id, sealed), 'embedded secret');
      await restarted.close();
    } finally {
      rmSync(dataDir, { recursive: true, force: true });
    }
  });
});
