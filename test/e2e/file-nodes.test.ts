import assert from 'node:assert/strict';
import { existsSync, mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { request } from 'node:http';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { DatabaseStorage } from '../../core/uploads/database-storage.ts';
import { callerAt, type Caller } from '../support/caller.ts';
import { createScratchDatabase, databaseEnv, type ScratchDatabase, TEST_DATABASE_URL } from '../support/database.ts';
import { startTestApp, TEST_MASTER_KEY, type TestApp } from '../support/harness.ts';
import { eventually } from '../support/peers.ts';
import { freePort, killLeftoverProcesses, runServer, whenHealthy, type RunningProcess } from '../support/process.ts';
import { tinyPng } from '../support/uploads.ts';

/**
 * Files kept in PostgreSQL (FILE_STORAGE's default there) serve every node:
 * node A, the service as `npm start` runs it, and node B, in this process,
 * share one database and no folder. What A stores B serves byte for byte, and
 * what A was writing when it was killed is never served and is swept.
 */

/** Markdown of about `bytes` bytes, different on every line, so that it spans several chunks that are not all the same. */
function markdownOf(bytes: number, title: string): Buffer {
  const lines = [`# ${title}`, ''];
  for (let n = 0, size = 0; size < bytes; n++) {
    const line = `- line ${n}: ${((n * 2654435761) >>> 0).toString(16).padStart(8, '0').repeat(8)}`;
    lines.push(line);
    size += line.length + 1;
  }
  return Buffer.from(lines.join('\n') + '\n');
}

/** Every regular file under `folder` (none when it does not exist). */
function filesUnder(folder: string): string[] {
  if (!existsSync(folder)) return [];
  return readdirSync(folder, { recursive: true, withFileTypes: true })
    .filter((entry) => entry.isFile())
    .map((entry) => path.join(entry.parentPath, entry.name));
}

const pause = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

describe('uploaded files across two nodes on one PostgreSQL', { skip: TEST_DATABASE_URL ? false : 'needs PostgreSQL', timeout: 5 * 60_000 }, () => {
  const work = mkdtempSync(path.join(tmpdir(), 'rpc-file-nodes-'));
  const dataDirA = path.join(work, 'node-a');
  const dataDirB = path.join(work, 'node-b');
  let scratch: ScratchDatabase;
  let b: TestApp;
  let a: RunningProcess | undefined;
  let baseA = '';
  let owner: { token: string; subscriptionId: string };
  const auth = () => ({ authorization: `Bearer ${owner.token}` });

  /** Operations called on node A, over HTTP. */
  let onA: Caller;

  async function putOnA(uploadKey: string, bytes: Buffer, type: string, fileName: string): Promise<void> {
    const response = await fetch(`${baseA}/api/uploads/${uploadKey}`, {
      method: 'PUT',
      headers: { ...auth(), 'content-type': type, 'x-file-name': encodeURIComponent(fileName) },
      body: new Uint8Array(bytes),
    });
    const body = await response.json();
    assert.equal(response.status, 200, JSON.stringify(body));
  }

  async function postOnA(uploadKey: string, bytes: Buffer, type: string, fileName: string): Promise<void> {
    const form = new FormData();
    form.append('file', new Blob([new Uint8Array(bytes)], { type }), fileName);
    const response = await fetch(`${baseA}/api/uploads/${uploadKey}`, { method: 'POST', headers: auth(), body: form });
    const body = await response.json();
    assert.equal(response.status, 200, JSON.stringify(body));
  }

  /** `GET /api/files/<id>` through node B: status and bytes. */
  async function downloadFromB(fileUrl: string): Promise<{ status: number; bytes: Buffer }> {
    const response = await fetch(`${b.url}${fileUrl}`, { headers: auth() });
    return { status: response.status, bytes: Buffer.from(await response.arrayBuffer()) };
  }

  const count = async (sql: string, params: unknown[] = []): Promise<number> =>
    (await b.app.deps.db.execute<{ n: number }>(`select count(*)::int as n from (${sql}) counted`, params))[0]!.n;

  before(async () => {
    scratch = await createScratchDatabase(TEST_DATABASE_URL!);
    // B first: it migrates the scratch database, A then finds it ready.
    b = await startTestApp({ databaseUrl: scratch.url, dataDir: dataDirB, withNotes: false, env: { JOBS_POLL_MS: '500' } });
    const port = await freePort();
    baseA = `http://127.0.0.1:${port}`;
    a = runServer({
      ...databaseEnv(scratch.url),
      MASTER_KEY: TEST_MASTER_KEY,
      DATA_DIR: dataDirA,
      PORT: String(port),
      LOG_LEVEL: 'warn',
      WORKERS: '1',
      JOBS_POLL_MS: '500',
    });
    await whenHealthy(a, baseA, 90_000);
    owner = await callerAt(baseA, null).AuthRpc.signup({ email: 'owner@example.com', username: 'fileowner', password: 'a long enough password' });
    onA = callerAt(baseA, owner);
  });

  after(async () => {
    killLeftoverProcesses();
    await a?.exited(10_000).catch(() => undefined);
    await b?.close();
    await scratch?.drop();
    rmSync(work, { recursive: true, force: true });
  });

  it('serves through node B, byte for byte, a profile picture, a playbook resource and a knowledge-base file uploaded through node A', async () => {
    // The profile picture, PUT.
    const picture = tinyPng(300, [10, 120, 200, 255]);
    const pictureKey = await onA.UserProfileRpc.getUploadKeyForProfilePicture();
    await putOnA(pictureKey.uploadKey, picture, 'image/png', 'me.png');
    const profile = await onA.UserProfileRpc.updateProfilePicture({ uploadKey: pictureKey.uploadKey });
    const profileOnB = await b.as(owner).UserProfileRpc.getUserProfile();
    assert.equal(profileOnB.profilePicture, profile.profilePicture);
    const pictureOnB = await downloadFromB(profileOnB.profilePicture!);
    assert.equal(pictureOnB.status, 200);
    assert.ok(pictureOnB.bytes.equals(picture), 'the profile picture B serves is the one A received');

    // A playbook resource of several chunks, multipart POST.
    const script = markdownOf(700 * 1024, 'Call script');
    const playbook = await onA.PlaybookRpc.create({ name: 'Across nodes', content: 'See the script.' });
    const resourceKey = await onA.PlaybookRpc.getResourceUploadKey({ playbookId: playbook._id });
    await postOnA(resourceKey.uploadKey, script, 'text/markdown', 'script.md');
    const finalized = await onA.PlaybookRpc.finalizeResourceUpload({ playbookId: playbook._id, uploadKey: resourceKey.uploadKey });
    assert.equal(finalized.added, 1);
    const [resource] = (await b.as(owner).PlaybookRpc.findById({ _id: playbook._id })).resources;
    assert.deepEqual([resource.fileName, resource.size], ['script.md', script.length]);
    const scriptOnB = await downloadFromB(`/api/files/${resource.fileId}`);
    assert.equal(scriptOnB.status, 200);
    assert.ok(scriptOnB.bytes.equals(script), `the resource B serves (${scriptOnB.bytes.length} bytes) is the one A received (${script.length})`);

    // A knowledge-base file, PUT and ingested by whichever node takes the job.
    const notes = Buffer.from('# Depot notes\n\nThe depot opens at seven and closes at six.\n\n## Keys\n\nThe key box is left of the gate.\n');
    const kbKey = await onA.KnowledgeBaseAdminRpc.getUploadKey();
    await putOnA(kbKey.uploadKey, notes, 'text/markdown', 'depot.md');
    const { documents } = await onA.KnowledgeBaseAdminRpc.ingestFiles({ uploadKey: kbKey.uploadKey, collection: 'depot' });
    assert.equal(documents.length, 1);
    const document = await eventually(async () => {
      const read = await b.as(owner).KnowledgeBaseAdminRpc.getDocument({ docId: documents[0]._id });
      return ['ready', 'failed'].includes(read.status) ? read : undefined;
    }, 60_000);
    assert.equal(document.status, 'ready', `ingestion: ${document.error}`);
    assert.equal(document.sizeBytes, notes.length);
    assert.match(document.content!, /The depot opens at seven and closes at six\./);
    const [version] = await b.as(owner).KnowledgeBaseAdminRpc.getDocumentVersions({ docId: documents[0]._id });
    assert.equal(version.fileName, 'depot.md');
    const notesOnB = await downloadFromB(`/api/files/${version.fileId}`);
    assert.equal(notesOnB.status, 200);
    assert.ok(notesOnB.bytes.equals(notes), 'the knowledge-base file B serves is the one A received');

    // The bytes are in the database, on no node's disk.
    assert.equal(
      await count('select 1 from core_blob where subscription_id = ? and complete and id in (?, ?, ?)', [
        owner.subscriptionId,
        profile.profilePicture!.split('/').pop(),
        resource.fileId,
        version.fileId,
      ]),
      3,
    );
    assert.deepEqual(filesUnder(path.join(dataDirA, 'files')), [], "node A's DATA_DIR/files");
    assert.deepEqual(filesUnder(path.join(dataDirB, 'files')), [], "node B's DATA_DIR/files");
  });

  it('leaves nothing readable of an upload whose node was killed mid-file, and sweeps its bytes', async () => {
    const filesBefore = await count('select 1 from core_file where subscription_id = ?', [owner.subscriptionId]);
    const playbook = await onA.PlaybookRpc.create({ name: 'Interrupted' });
    const { uploadKey } = await onA.PlaybookRpc.getResourceUploadKey({ playbookId: playbook._id });

    // A 2 MiB body, declared whole, sent 64 KiB at a time until the test says stop: it never ends.
    const total = 2 * 1024 * 1024;
    const piece = markdownOf(64 * 1024, 'Slow').subarray(0, 64 * 1024);
    let stop = false;
    let sent = 0;
    const upload = request({
      host: '127.0.0.1',
      port: Number(new URL(baseA).port),
      path: `/api/uploads/${uploadKey}`,
      method: 'PUT',
      headers: { ...auth(), 'content-type': 'text/markdown', 'content-length': String(total), 'x-file-name': 'slow.md' },
    });
    const ended = new Promise<string>((resolve) => {
      upload.on('error', (error: NodeJS.ErrnoException) => resolve(error.code ?? error.message));
      upload.on('response', (response) => resolve(`answered ${response.statusCode}`));
    });
    const writing = (async () => {
      while (!stop && sent + piece.length < total) {
        upload.write(piece);
        sent += piece.length;
        await pause(100);
      }
    })();

    // Killed once at least one chunk of it is stored, while the blob is incomplete.
    const blob = await eventually(async () => {
      const [row] = await b.app.deps.db.execute<{ id: string; parts: number }>(
        `select b.id, (select count(*)::int from core_blob_part p where p.subscription_id = b.subscription_id and p.blob_id = b.id) as parts
         from core_blob b where b.subscription_id = ? and not b.complete`,
        [owner.subscriptionId],
      );
      return row && row.parts >= 1 ? row : undefined;
    }, 30_000);
    stop = true;
    a!.child.kill('SIGKILL');
    assert.equal((await a!.exited(15_000)).signal, 'SIGKILL');
    await writing;
    assert.notEqual(await ended, 'answered 200', 'the upload was not answered as stored');
    assert.ok(sent < total, `${sent} of ${total} bytes were sent`);
    console.log(`# killed node A with ${blob.parts} chunk(s) of the upload stored, ${sent} bytes sent`);

    // Through node B: no file for it, and its bytes are not served.
    const storagePath = `${owner.subscriptionId}/${blob.id}`;
    assert.equal(await count('select 1 from core_file where id = ?', [blob.id]), 0, 'no core_file row for the interrupted upload');
    assert.equal(await count('select 1 from core_file where subscription_id = ?', [owner.subscriptionId]), filesBefore);
    const storage = new DatabaseStorage(b.app.deps.db);
    await assert.rejects(storage.get(storagePath), { code: 'ENOENT' });
    assert.equal((await downloadFromB(`/api/files/${blob.id}`)).status, 404);
    assert.equal(await count('select 1 from core_blob where subscription_id = ? and id = ? and not complete', [owner.subscriptionId, blob.id]), 1);

    // B's periodic sweep spares writes younger than its grace period, as it must for uploads still in flight on other nodes.
    await b.app.deps.uploadService.sweep();
    assert.equal(await count('select 1 from core_blob where id = ?', [blob.id]), 1, 'a write within the grace period is left to finish');

    assert.equal(await storage.sweep(new Date(Date.now() + 1000)), 1);
    assert.equal(await count('select 1 from core_blob where id = ?', [blob.id]), 0);
    assert.equal(await count('select 1 from core_blob_part where blob_id = ?', [blob.id]), 0);

    // What remains of the subscription's bytes belongs to finalized files, every chunk counted right.
    const finalized = `select id from core_file where subscription_id = ? and finalized_at is not null`;
    const sub = owner.subscriptionId;
    assert.equal(await count(`select 1 from core_blob where subscription_id = ? and (not complete or id not in (${finalized}))`, [sub, sub]), 0);
    assert.equal(await count(`select 1 from core_blob_part where subscription_id = ? and blob_id not in (${finalized})`, [sub, sub]), 0);
    assert.equal(
      await count(
        `select 1 from core_blob_chunk c where c.subscription_id = ?
           and c.refs <> (select count(*) from core_blob_part p where p.subscription_id = c.subscription_id and p.hash = c.hash)`,
        [sub],
      ),
      0,
      'no chunk is left that no part names, and each counts the parts naming it',
    );
    assert.ok((await count('select 1 from core_blob where subscription_id = ?', [sub])) >= 3, "part 1's files are still there");
    assert.deepEqual(filesUnder(path.join(dataDirA, 'files')), [], "node A's DATA_DIR/files");
  });
});
