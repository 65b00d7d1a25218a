import assert from 'node:assert/strict';
import { createHash, randomBytes, randomUUID } from 'node:crypto';
import { cpSync, createWriteStream, existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { pipeline } from 'node:stream/promises';
import { after, before, describe, it } from 'node:test';
import { createGzip } from 'node:zlib';
import * as tar from 'tar';
import { createScratchDatabase, databaseEnv, type ScratchDatabase, TEST_DATABASE_URL } from '../support/database.ts';
import { NOTES_PLUGIN } from '../support/harness.ts';
import { startOpenIdProvider, TestBrowser } from '../support/oidc.ts';
import { freePort, killLeftoverProcesses, runInProject, runServer, whenHealthy, type RunningProcess } from '../support/process.ts';
import { callerAt, refused, type Credential } from '../support/caller.ts';
import { dataOf, type Envelope } from '../support/wire.ts';
import type { UploadedFile } from '../../clients/typescript/src/client.ts';

/**
 * Archives from outside are untrusted input: their manifest's sizes and
 * SHA-256 are checksums, not a signature, so whoever hands an operator a
 * tenant export or a backup can write anything into it and recompute them.
 * Here an attacker exports their own tenant from one installation, tampers
 * with it as they please, recomputes the manifest and packs it with a tar
 * writer of their own (which writes any member name, size and order); the
 * operator of another installation, holding a victim tenant, runs the real
 * `tenant import` (through the serving process's control socket) or
 * `restore`. Each is refused whole, for what it is, and leaves nothing behind.
 */
const PASSWORD = 'a long enough password';
const STEP_MS = 180_000;
const PNG = Buffer.from('iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAChwGA60e6kgAAAABJRU5ErkJggg==', 'base64');

interface Node {
  env: Record<string, string>;
  dataDir: string;
  base: string;
  server: RunningProcess;
}

interface Entry {
  path: string;
  size: number;
  sha256: string;
}

/** A manifest as the attacker edits it: entries it adds name a path alone (forge recomputes them all); a tenant export's tables and what else it holds are kept as read. */
interface ForgedManifest {
  entries: (Pick<Entry, 'path'> & Partial<Entry>)[];
  tables?: { name: string; rows: number }[];
  [field: string]: unknown;
}

/** A member of an archive the attacker writes: its name, and its bytes, or so many bytes of filler streamed. */
interface Member {
  name: string;
  content?: Buffer;
  filler?: number;
}

/** A MB of filler: a random byte in 64, zeros between, so it compresses about 40 to 1 (tar itself refuses 1,000 to 1). */
function fillerChunk(): Buffer {
  const chunk = Buffer.alloc(1 << 20);
  const noise = randomBytes(chunk.length / 64);
  for (let index = 0; index < noise.length; index++) chunk[index * 64] = noise[index]!;
  return chunk;
}

const sha256 = (content: Buffer): string => createHash('sha256').update(content).digest('hex');

/** A gzipped tar written block by block, as any tool could: member names are not cleaned, sizes are what the headers say. */
async function writeTar(out: string, members: Member[]): Promise<void> {
  async function* blocks(): AsyncGenerator<Buffer> {
    for (const member of members) {
      const size = member.content?.length ?? member.filler ?? 0;
      const header = new tar.Header({ path: member.name, mode: 0o644, size, mtime: new Date(), type: 'File', uid: 0, gid: 0 });
      header.encode();
      yield header.block!;
      if (member.content) yield member.content;
      else for (let left = size; left > 0; left -= 1 << 20) yield fillerChunk().subarray(0, Math.min(left, 1 << 20));
      if (size % 512) yield Buffer.alloc(512 - (size % 512));
    }
    yield Buffer.alloc(1024);
  }
  await pipeline(blocks(), createGzip(), createWriteStream(out));
}

describe('archives from outside are untrusted input', { timeout: 15 * 60_000 }, () => {
  const work = mkdtempSync(path.join(tmpdir(), 'rpc-archive-trust-'));
  const databases: ScratchDatabase[] = [];
  let source: Node;
  let target: Node;
  const exported = path.join(work, 'acme.tar.gz');
  const unpacked = path.join(work, 'acme');
  const backupArchive = path.join(work, 'backup.tar.gz');
  const backupUnpacked = path.join(work, 'backup');
  let acmeId: string;
  let victimId: string;
  let victimSession: { token: string };
  let victimFileId: string;

  async function scratchEnv(): Promise<Record<string, string>> {
    if (!TEST_DATABASE_URL) return {};
    const database = await createScratchDatabase(TEST_DATABASE_URL);
    databases.push(database);
    return { ...databaseEnv(database.url), MASTER_KEY: Buffer.alloc(32, 7).toString('base64') };
  }

  async function nodeEnv(name: string, extra: Record<string, string> = {}): Promise<Record<string, string>> {
    return { DATA_DIR: path.join(work, name), PLUGINS: NOTES_PLUGIN, LOG_LEVEL: 'warn', SIGNUP_IP_LIMIT: '1000', ...extra, ...(await scratchEnv()) };
  }

  async function start(env: Record<string, string>, port?: number): Promise<Node> {
    port ??= await freePort();
    const base = `http://127.0.0.1:${port}`;
    const server = runServer({ ...env, PORT: String(port) });
    await whenHealthy(server, base, 90_000);
    return { env, dataDir: env.DATA_DIR!, base, server };
  }

  async function cli(env: Record<string, string>, ...args: string[]): Promise<{ code: number | null; output: string }> {
    const child = runInProject(process.execPath, ['bin/rpc-service.js', ...args], env);
    const { code } = await child.exited(STEP_MS);
    return { code, output: `${child.stdout()}${child.stderr()}`.trim() };
  }

  /** Operations called on a node over HTTP, as `who` (anonymously by default). */
  const on = (node: Node, who: Credential | null = null) => callerAt(node.base, who);

  async function upload(node: Node, session: { token: string }, content: Buffer): Promise<string> {
    const { uploadUrl, uploadKey } = await on(node, session).UserProfileRpc.getUploadKeyForProfilePicture();
    const uploaded = await fetch(uploadUrl, {
      method: 'PUT',
      headers: { authorization: `Bearer ${session.token}`, 'content-type': 'image/png' },
      body: new Uint8Array(content),
    });
    const fileId = dataOf((await uploaded.json()) as Envelope<{ files: UploadedFile[] }>).files[0]!.fileId;
    await on(node, session).UserProfileRpc.updateProfilePicture({ uploadKey });
    return fileId;
  }

  const readManifest = (folder: string) => JSON.parse(readFileSync(path.join(folder, 'manifest.json'), 'utf8')) as ForgedManifest;
  const tableFile = (folder: string, table: string) => path.join(folder, 'tables', `${table}.ndjson`);
  const rowsOf = (folder: string, table: string): Record<string, unknown>[] =>
    readFileSync(tableFile(folder, table), 'utf8')
      .split('\n')
      .filter(Boolean)
      .map((line) => JSON.parse(line) as Record<string, unknown>);
  const writeRows = (folder: string, table: string, rows: Record<string, unknown>[]) =>
    writeFileSync(tableFile(folder, table), rows.map((row) => `${JSON.stringify(row)}\n`).join(''));

  /**
   * A copy of an unpacked archive, tampered by `tamper`, its manifest's entries
   * and table counts recomputed (the attacker's own work), packed as `name`:
   * a member for each entry, under the name its path reaches (`a/../b` as
   * `b`) unless `replace` gives another for it, then the `extra` members. A
   * tenant export's transfer key is copied beside it.
   */
  async function forge(
    from: string,
    name: string,
    tamper: (folder: string, manifest: ForgedManifest) => void,
    { extra = [], replace = {} }: { extra?: Member[]; replace?: Record<string, Member> } = {},
  ): Promise<string> {
    const folder = path.join(work, `forged-${name}`);
    rmSync(folder, { recursive: true, force: true });
    cpSync(from, folder, { recursive: true });
    const manifest = readManifest(folder);
    tamper(folder, manifest);
    for (const table of manifest.tables ?? []) {
      if (existsSync(tableFile(folder, table.name))) table.rows = rowsOf(folder, table.name).length;
    }
    manifest.entries = manifest.entries.map((entry): Entry => {
      const content = readFileSync(path.join(folder, entry.path));
      return { path: entry.path, size: content.length, sha256: sha256(content) };
    });
    const listing = Buffer.from(JSON.stringify(manifest));
    const out = path.join(work, `${name}.tar.gz`);
    await writeTar(out, [
      { name: 'manifest.json', content: listing },
      ...manifest.entries.map(
        (entry): Member => replace[entry.path] ?? { name: path.posix.normalize(entry.path), content: readFileSync(path.join(folder, entry.path)) },
      ),
      ...extra,
    ]);
    if (existsSync(`${exported}.key`)) cpSync(`${exported}.key`, `${out}.key`);
    return out;
  }

  /** The target imports the archive: refused, nothing of the attacker's tenant is there, and no staging folder is left in its DATA_DIR. */
  async function importRefused(archive: string, reason: RegExp): Promise<void> {
    const { code, output } = await cli(target.env, 'tenant', 'import', '--from', archive);
    assert.equal(code, 1, output);
    assert.match(output, reason);
    assert.doesNotMatch(output, /ENOTEMPTY|ENOENT/);
    await refused(on(target).AuthRpc.login({ identifier: 'acme-owner', password: PASSWORD }), 'UNAUTHENTICATED', 'nothing imported');
    assert.deepEqual(
      readdirSync(target.dataDir).filter((name) => name.startsWith('.tenant-import-')),
      [],
      'no staging folder left',
    );
  }

  before(async () => {
    [source, target] = await Promise.all([nodeEnv('source').then((env) => start(env)), nodeEnv('target').then((env) => start(env))]);

    const acme = await on(source).AuthRpc.signup({ email: 'owner@acme.example', username: 'acme-owner', password: PASSWORD });
    acmeId = acme.user.subscriptionId;
    await on(source, acme).call('NoteRpc.add', { text: 'a note of a third-party plugin' });
    await upload(source, acme, PNG);

    const victim = await on(target).AuthRpc.signup({ email: 'owner@victim.example', username: 'victim-owner', password: PASSWORD });
    victimId = victim.user.subscriptionId;
    victimSession = victim;
    await on(target, victimSession).SecretsRpc.create({ zone: 'ops', key: 'DEPLOY_TOKEN', value: 'the victim secret' });
    victimFileId = await upload(target, victimSession, Buffer.concat([PNG, Buffer.from('the victim picture')]));

    const exporting = await cli(source.env, 'tenant', 'export', '--subscription', acmeId, '--out', exported);
    assert.equal(exporting.code, 0, exporting.output);
    mkdirSync(unpacked);
    await tar.extract({ file: exported, cwd: unpacked });
    const backingUp = await cli(source.env, 'backup', '--out', backupArchive);
    assert.equal(backingUp.code, 0, backingUp.output);
    mkdirSync(backupUnpacked);
    await tar.extract({ file: backupArchive, cwd: backupUnpacked });
  });

  after(async () => {
    killLeftoverProcesses();
    for (const database of databases) await database.drop();
    rmSync(work, { recursive: true, force: true });
  });

  it('refuses a tenant export holding a user of another subscription: no admin is planted in the victim tenant', async () => {
    const archive = await forge(unpacked, 'planted-admin', (folder) => {
      const users = rowsOf(folder, 'auth_user');
      const owner = users.find((user) => user.username === 'acme-owner')!;
      users.push({ ...owner, id: randomUUID(), subscription_id: victimId, role: 'admin', email: 'planted@evil.example', username: 'planted' });
      writeRows(folder, 'auth_user', users);
    });
    await importRefused(
      archive,
      new RegExp(
        `^Cannot import the tenant: \\S+: line 2 of tables/auth_user\\.ndjson is a row of subscription_id "${victimId}", not of the subscription ${acmeId} the archive moves: the archive was altered, and nothing of it was imported$`,
      ),
    );
    await refused(on(target).AuthRpc.login({ identifier: 'planted', password: PASSWORD }), 'UNAUTHENTICATED', 'no planted account');
    const users = await on(target, victimSession).AdminUserRpc.getData({ pageSize: 200 });
    assert.deepEqual(
      users.docs.map((user) => user.username),
      ['victim-owner'],
      "the victim tenant's users are its own",
    );
  });

  it("refuses a third-party plugin's row of another subscription, and a subscription row of another id", async () => {
    const note = await forge(unpacked, 'foreign-note', (folder) => {
      writeRows(
        folder,
        'notes',
        rowsOf(folder, 'notes').map((row) => ({ ...row, subscription_id: victimId })),
      );
    });
    await importRefused(note, new RegExp(`line 1 of tables/notes\\.ndjson is a row of subscription_id "${victimId}", not of the subscription ${acmeId}`));

    const other = randomUUID();
    const subscription = await forge(unpacked, 'foreign-subscription', (folder) => {
      writeRows(
        folder,
        'auth_subscription',
        rowsOf(folder, 'auth_subscription').map((row) => ({ ...row, id: other })),
      );
    });
    await importRefused(subscription, new RegExp(`line 1 of tables/auth_subscription\\.ndjson is a row of id "${other}", not of the subscription ${acmeId}`));
  });

  it("refuses a file row that names another tenant's stored bytes", async () => {
    const archive = await forge(unpacked, 'foreign-file', (folder) => {
      writeRows(
        folder,
        'core_file',
        rowsOf(folder, 'core_file').map((row) => ({ ...row, storage_path: `${victimId}/${victimFileId}` })),
      );
    });
    await importRefused(archive, /line 1 of tables\/core_file\.ndjson its storage_path "[0-9a-f-]+\/[0-9a-f-]+" is not the file's own/);
    const file = await fetch(`${target.base}/api/files/${victimFileId}`, { headers: { authorization: `Bearer ${victimSession.token}` } });
    assert.equal(file.status, 200, "the victim's file is still there");
  });

  it('refuses a user whose e-mail another tenant here holds, naming the key', async () => {
    const archive = await forge(unpacked, 'taken-email', (folder) => {
      writeRows(
        folder,
        'auth_user',
        rowsOf(folder, 'auth_user').map((row) => ({ ...row, email: 'owner@victim.example' })),
      );
    });
    await importRefused(
      archive,
      /^Cannot import the tenant: \S+: a row of auth_user is already in this installation \(auth_user_email_key\): nothing of the archive was imported$/,
    );
  });

  it('refuses a tenant export with a member its manifest does not list, or a path out of its folder, at that member', async () => {
    const surplus = await forge(unpacked, 'surplus-member', () => undefined, { extra: [{ name: 'files/unlisted', filler: 64 << 20 }] });
    await importRefused(
      surplus,
      /^Cannot import the tenant: \S+ holds files\/unlisted, which its manifest does not list: it is not a tenant export, or it was altered$/,
    );

    // The manifest lists a path out of the folder it names, and the member holds it; the checksum is taken of what the path reaches.
    const escaping = 'folders/0/../../payload/pwned.txt';
    const traversal = await forge(unpacked, 'traversal', (folder, manifest) => {
      mkdirSync(path.join(folder, 'payload'));
      writeFileSync(path.join(folder, 'payload/pwned.txt'), 'pwned');
      manifest.entries.push({ path: escaping });
    });
    await importRefused(
      traversal,
      /^Cannot import the tenant: \S+ its manifest lists an entry "folders\/0\/\.\.\/\.\.\/payload\/pwned\.txt", not a path inside the archive: it is not a tenant export, or it was altered$/,
    );
    assert.equal(existsSync(path.join(work, 'payload')), false);
  });

  it("takes no sign-in on the archive's word (provider links, an owner's proof of an address) unless the operator vouches for it", async () => {
    const idp = await startOpenIdProvider();
    try {
      // A victim's provider account and a person with the address the attacker's account has.
      idp.accounts.set('victim-subject', { email: 'victim@mail.example' });
      idp.accounts.set('owner-subject', { email: 'owner@acme.example' });
      const archive = await forge(unpacked, 'forged-sign-ins', (folder) => {
        const users = rowsOf(folder, 'auth_user');
        const owner = users.find((user) => user.username === 'acme-owner')!;
        assert.equal(owner.email_proven, null, 'the owner signed up without a code');
        writeRows(
          folder,
          'auth_user',
          users.map((user) => (user === owner ? { ...user, email_proven: 'owner@acme.example', email_proven_by: 'code' } : user)),
        );
        const link = {
          provider: 'idp',
          subject: 'victim-subject',
          user_id: owner.id,
          subscription_id: acmeId,
          email: 'victim@mail.example',
          created_at: new Date().toISOString(),
        };
        writeRows(folder, 'auth_oauth_link', [...rowsOf(folder, 'auth_oauth_link'), link]);
      });

      // Two new installations signing in with the provider: the operator imports the archive into one as it is, into the other vouching for it.
      const [untrustingPort, trustingPort] = [await freePort(), await freePort()];
      idp.configure([untrustingPort, trustingPort].map((port) => `http://127.0.0.1:${port}/auth/idp/callback`));
      const importInto = async (name: string, port: number, ...flags: string[]) => {
        const env = await nodeEnv(name, {
          PUBLIC_URL: `http://127.0.0.1:${port}`,
          OAUTH_PROVIDERS: 'idp',
          OAUTH_IDP_ISSUER: idp.issuer,
          OAUTH_IDP_CLIENT_ID: 'rpc-service',
          OAUTH_IDP_CLIENT_SECRET: 'test-client-secret',
          OAUTH_ALLOW_HTTP: 'true',
        });
        const imported = await cli(env, 'tenant', 'import', '--from', archive, ...flags);
        assert.equal(imported.code, 0, imported.output);
        return { node: await start(env, port), output: imported.output };
      };

      /** Where a person signing in with the provider as `subject` lands: the session's account, or the question before joining one. */
      const signIn = async (node: Node, subject: string): Promise<{ username: string; subscriptionId: string } | 'asked'> => {
        const browser = new TestBrowser();
        const answer = await browser.signInAt(`${node.base}/auth/idp`, subject, idp.issuer);
        const token = browser.cookie(new URL(node.base).host, 'session');
        if (!token) {
          assert.equal(answer.status, 200);
          assert.match(await answer.text(), /acme-owner/);
          return 'asked';
        }
        const session = await on(node, { token }).AuthRpc.getSession();
        return { username: session.user.username, subscriptionId: session.subscriptionId };
      };

      const untrusting = await importInto('untrusting', untrustingPort);
      const victim = await signIn(untrusting.node, 'victim-subject');
      assert.ok(victim !== 'asked', 'the victim signs in');
      assert.notEqual(victim.subscriptionId, acmeId, "the victim's sign-in is not in the attacker's tenant");
      assert.equal(await signIn(untrusting.node, 'owner-subject'), 'asked', "the address's proof did not come with the archive");
      assert.equal((await on(untrusting.node).AuthRpc.login({ identifier: 'acme-owner', password: PASSWORD })).user.username, 'acme-owner', 'the tenant came');
      assert.match(
        untrusting.output,
        /Left out what an archive cannot vouch for \(--trust-sign-ins keeps it, for an archive your own installation wrote\): provider sign-in links \(1\): .+; owners' proofs of their address \(1\): .+\.$/m,
      );

      const trusting = await importInto('trusting', trustingPort, '--trust-sign-ins');
      assert.doesNotMatch(trusting.output, /Left out/);
      assert.deepEqual(await signIn(trusting.node, 'victim-subject'), { username: 'acme-owner', subscriptionId: acmeId }, 'the link came');
      assert.deepEqual(await signIn(trusting.node, 'owner-subject'), { username: 'acme-owner', subscriptionId: acmeId }, 'the proof came');
    } finally {
      await idp.close();
    }
  });

  it('restore refuses a manifest entry that resolves outside DATA_DIR, and writes nothing there', async () => {
    // The issue's one entry, under data/ as a backup's files are, its checksum that of the member, which carries the same name.
    const escaping = 'data/a/../../payload/pwned.txt';
    const archive = await forge(
      backupUnpacked,
      'restore-traversal',
      (folder, manifest) => {
        mkdirSync(path.join(folder, 'payload'));
        writeFileSync(path.join(folder, 'payload/pwned.txt'), 'pwned');
        manifest.entries.push({ path: escaping });
      },
      { replace: { [escaping]: { name: escaping, content: Buffer.from('pwned') } } },
    );
    const restored = path.join(work, 'restored');
    const dataDir = path.join(restored, 'data');
    const { code, output } = await cli({ DATA_DIR: dataDir, PLUGINS: NOTES_PLUGIN, ...(await scratchEnv()) }, 'restore', '--from', archive);
    assert.equal(code, 1, output);
    assert.match(output, /^Cannot restore: \S+ its manifest lists an entry "data\/a\/\.\.\/\.\.\/payload\/pwned\.txt", not a path inside the archive/);
    assert.equal(existsSync(path.join(restored, 'payload')), false, 'nothing beside DATA_DIR');
    assert.equal(existsSync(dataDir), false, 'the refused restore made no DATA_DIR');
  });

  it('restore stops at a member larger than its manifest says, before writing its bytes', async () => {
    // The manifest lists ten bytes; the member holds 32 MB (under 1 MB gzipped).
    const bomb = await forge(
      backupUnpacked,
      'restore-bomb',
      (folder, manifest) => {
        mkdirSync(path.join(folder, 'data/files'), { recursive: true });
        writeFileSync(path.join(folder, 'data/files/bomb'), 'ten bytes!');
        manifest.entries.unshift({ path: 'data/files/bomb' });
      },
      { replace: { 'data/files/bomb': { name: 'data/files/bomb', filler: 32 << 20 } } },
    );
    const dataDir = path.join(work, 'restored-bomb');
    // Files the command writes are limited to 8 MB (16 MB where ulimit counts 1,024-byte blocks): the bomb's bytes never get that far.
    const child = runInProject('/bin/sh', ['-c', 'ulimit -f 16384 && exec "$@"', 'sh', process.execPath, 'bin/rpc-service.js', 'restore', '--from', bomb], {
      DATA_DIR: dataDir,
      PLUGINS: NOTES_PLUGIN,
      ...(await scratchEnv()),
    });
    const { code, signal } = await child.exited(STEP_MS);
    const output = `${child.stdout()}${child.stderr()}`.trim();
    assert.deepEqual({ code, signal }, { code: 1, signal: null }, output);
    assert.match(
      output,
      /^Cannot restore: \S+ holds data\/files\/bomb of 33554432 bytes where its manifest says 10: it is not a backup archive, or it was altered$/,
    );
    assert.equal(existsSync(dataDir), false, 'the refused restore made no DATA_DIR');
  });
});
