import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { connect } from 'node:net';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import * as v from 'valibot';
import { definePlugin, operationBuilder, type Deps } from 'rpc-service/plugin';
import { DatabaseStorage } from '../../core/uploads/database-storage.ts';
import { startTestApp, type TestApp } from '../support/harness.ts';
import { getFile, postUpload, putUpload, tinyPng } from '../support/uploads.ts';
import { dataOf, type Envelope, type WireError } from '../support/wire.ts';
import { addUser } from '../support/users.ts';

const defineOperation = operationBuilder<Deps<['uploadService']>>();

/** A purpose of its own, so the core is tested apart from any real feature: two files, text or PNG. */
const probePlugin = definePlugin({
  id: 'upload-probe',
  group: 'UploadProbeRpc',
  coreVersion: '^2.0.0',
  deps: ['uploadService'],
  start: ({ uploadService }) => uploadService.definePurpose('probe-docs', { maxBytes: 64 * 1024, types: ['text/plain', 'image/png'], maxFiles: 2 }),
  operations: {
    getKey: defineOperation({
      access: 'user',
      describe: 'An upload key for probe documents.',
      params: v.object({}),
      handler: ({ ctx, deps }) => deps.uploadService.createKey(ctx, 'probe-docs'),
    }),
    finalize: defineOperation({
      access: 'user',
      describe: 'Finalize a probe upload; answers its files.',
      params: v.object({ uploadKey: v.string() }),
      handler: ({ params, ctx, deps }) => deps.uploadService.consume(ctx, params.uploadKey, 'probe-docs', async (files: unknown[]) => files),
    }),
  },
});

const sha256 = (bytes: Buffer) => createHash('sha256').update(bytes).digest('hex');
const TEXT = Buffer.from('plain words, nothing more\n');

type Account = Awaited<ReturnType<TestApp['signup']>>;

/** A row of core_file, the columns these tests read. */
interface FileRow {
  id: string;
  user_id: string | null;
  purpose: string;
  sha256: string;
  storage_path: string;
  finalized_at: Date | null;
}

async function fileRows(t: TestApp, subscriptionId: string) {
  return t.app.deps.db.execute<FileRow>('select * from core_file where subscription_id = ? order by created_at', [subscriptionId]);
}

/** Stored files of a subscription where the storage keeps them (FILE_STORAGE), ignoring nothing: half-written ones count too. */
async function storedFiles(t: TestApp, subscriptionId: string): Promise<string[]> {
  if (t.app.config.fileStorage === 'database') {
    const rows = await t.app.deps.db.execute<{ id: string }>('select id from core_blob where subscription_id = ?', [subscriptionId]);
    return rows.map((row) => row.id);
  }
  const folder = path.join(t.dataDir, 'files', subscriptionId);
  return existsSync(folder) ? readdirSync(folder) : [];
}

/** A stored file's bytes as the storage keeps them, read past the service. */
async function storedBytes(t: TestApp, storagePath: string): Promise<Buffer> {
  if (t.app.config.fileStorage === 'database') return Buffer.concat(await (await new DatabaseStorage(t.app.deps.db).get(storagePath)).toArray());
  return readFileSync(path.join(t.dataDir, 'files', storagePath));
}

/** Asserts an upload or a call was refused with this status and code (and a message matching), and answers the refusal. */
function assertRefused(answer: { status: number; body: unknown }, status: number, code: string, message?: RegExp): WireError {
  assert.equal(answer.status, status, JSON.stringify(answer.body));
  const body = answer.body as Envelope;
  if (body.success !== false) assert.fail(`expected a refusal: ${JSON.stringify(body)}`);
  assert.equal(body.data.code, code);
  if (message) assert.match(body.data.error, message);
  return body.data;
}

describe('uploads and files', () => {
  let t: TestApp;
  let ann: Account;
  let other: Account;

  before(async () => {
    t = await startTestApp({ extraPlugins: [probePlugin] });
    ann = await t.signup();
    other = await t.signup();
  });
  after(() => t.close());

  const probeKey = async (account: { token: string } = ann) => (await t.ok('UploadProbeRpc.getKey', {}, { token: account.token })).uploadKey as string;

  it('PUT stores a file that, once finalized, any user of the subscription reads back byte for byte', async () => {
    const png = tinyPng(3);
    const uploadKey = await probeKey();
    const put = await putUpload(t, uploadKey, png, 'image/png', { token: ann.token, fileName: 'dir/../été photo.png' });
    assert.equal(put.status, 200, JSON.stringify(put.body));
    assert.equal(put.body.success, true);
    const [file] = dataOf(put.body).files;
    assert.deepEqual(Object.keys(file).sort(), ['fileId', 'fileName', 'mimeType', 'size']);
    assert.equal(file.fileName, 'été photo.png');
    assert.equal(file.mimeType, 'image/png');
    assert.equal(file.size, png.length);

    const before = await getFile(t, `/api/files/${file.fileId}`, { token: ann.token });
    assert.equal(before.status, 404, 'not served before it is finalized');

    const finalized = await t.ok('UploadProbeRpc.finalize', { uploadKey }, { token: ann.token });
    assert.deepEqual(finalized, [file]);

    const colleague = await addUser(t, ann.subscriptionId, 'user');
    for (const reader of [ann, colleague]) {
      const served = await getFile(t, `/api/files/${file.fileId}`, { token: reader.token });
      assert.equal(served.status, 200);
      assert.ok(served.bytes.equals(png));
      assert.equal(served.headers.get('content-type'), 'image/png');
      assert.equal(served.headers.get('content-length'), String(png.length));
      assert.equal(served.headers.get('x-content-type-options'), 'nosniff');
      assert.match(served.headers.get('content-disposition')!, /^inline; filename=/);
      assert.ok(served.headers.get('x-request-id'));
    }

    const [row] = (await fileRows(t, ann.subscriptionId)).filter((candidate) => candidate.id === file.fileId);
    assert.equal(row!.sha256, sha256(png));
    assert.equal(row!.user_id, ann.user._id);
    assert.equal(row!.purpose, 'probe-docs');
    assert.equal(row!.storage_path, `${ann.subscriptionId}/${file.fileId}`);
    assert.ok(row!.finalized_at);
    assert.ok((await storedBytes(t, `${ann.subscriptionId}/${file.fileId}`)).equals(png));
  });

  it('multipart POST takes several files, up to the purpose limit over all requests of a key', async () => {
    const png = tinyPng(2);
    const uploadKey = await probeKey();
    const posted = await postUpload(
      t,
      uploadKey,
      [
        { bytes: png, type: 'image/png', name: 'a.png' },
        { bytes: TEXT, type: 'text/plain', name: 'notes.txt', field: 'second' },
      ],
      { token: ann.token },
    );
    assert.equal(posted.status, 200, JSON.stringify(posted.body));
    assert.deepEqual(
      dataOf(posted.body).files.map((file) => [file.fileName, file.mimeType, file.size]),
      [
        ['a.png', 'image/png', png.length],
        ['notes.txt', 'text/plain', TEXT.length],
      ],
    );
    assertRefused(await putUpload(t, uploadKey, TEXT, 'text/plain', { token: ann.token }), 400, 'VALIDATION_ERROR', /at most 2 files/);

    const crowded = await probeKey();
    const before = (await storedFiles(t, ann.subscriptionId)).length;
    const three = await postUpload(
      t,
      crowded,
      [1, 2, 3].map((n) => ({ bytes: TEXT, type: 'text/plain', name: `${n}.txt` })),
      { token: ann.token },
    );
    assertRefused(three, 400, 'VALIDATION_ERROR', /at most 2 files/);
    assert.equal((await storedFiles(t, ann.subscriptionId)).length, before, 'the first two parts were removed again');
    assert.deepEqual(await t.ok('UploadProbeRpc.finalize', { uploadKey: crowded }, { token: ann.token }), []);
  });

  it('refuses a type the purpose does not take, and content that is not what it claims', async () => {
    const png = tinyPng();
    const profileKey = (await t.as(ann).UserProfileRpc.getUploadKeyForProfilePicture()).uploadKey;
    const cases: [string, Buffer, string, RegExp][] = [
      [profileKey, TEXT, 'image/png', /content is not of type image\/png/],
      [profileKey, png, 'text/plain', /text\/plain are not accepted/],
      [profileKey, png, 'image/jpeg', /content is not of type image\/jpeg/],
      [profileKey, Buffer.from('GIF89a but not really'), 'image/webp', /content is not of type image\/webp/],
      // text/plain has no signature of its own, but a PNG is recognisably not text.
      [await probeKey(), png, 'text/plain', /content is not of type text\/plain/],
      [await probeKey(), TEXT, 'application/pdf', /application\/pdf are not accepted/],
    ];
    const rowsBefore = (await fileRows(t, ann.subscriptionId)).length;
    const storedBefore = (await storedFiles(t, ann.subscriptionId)).length;
    for (const [uploadKey, bytes, type, message] of cases) {
      const put = await putUpload(t, uploadKey, bytes, type, { token: ann.token });
      assert.equal(assertRefused(put, 400, 'VALIDATION_ERROR', message).issues?.[0]?.path, 'file');
    }
    const posted = await postUpload(t, profileKey, [{ bytes: TEXT, type: 'image/png', name: 'x.png', field: 'picture' }], {
      token: ann.token,
    });
    assert.equal(assertRefused(posted, 400, 'VALIDATION_ERROR', /content is not of type image\/png/).issues?.[0]?.path, 'picture');
    assertRefused(await putUpload(t, profileKey, Buffer.alloc(0), 'image/png', { token: ann.token }), 400, 'VALIDATION_ERROR', /empty/);

    assert.equal((await fileRows(t, ann.subscriptionId)).length, rowsBefore);
    assert.equal((await storedFiles(t, ann.subscriptionId)).length, storedBefore);
    // A refused upload leaves the key as it was.
    assert.equal((await putUpload(t, profileKey, png, 'image/png', { token: ann.token })).status, 200);
  });

  it('a multipart body without a file, or not multipart at all, is refused', async () => {
    const uploadKey = await probeKey();
    const form = new FormData();
    form.append('note', 'just a field');
    const noFile = await fetch(`${t.url}/api/uploads/${uploadKey}`, { method: 'POST', body: form, headers: { authorization: `Bearer ${ann.token}` } });
    assertRefused({ status: noFile.status, body: await noFile.json() }, 400, 'VALIDATION_ERROR', /no file/);
    const json = await fetch(`${t.url}/api/uploads/${uploadKey}`, {
      method: 'POST',
      body: '{}',
      headers: { authorization: `Bearer ${ann.token}`, 'content-type': 'application/json' },
    });
    assertRefused({ status: json.status, body: await json.json() }, 400, 'BAD_REQUEST', /multipart\/form-data/);
  });

  it('a key is finalized once; a used key takes no more files', async () => {
    const uploadKey = await probeKey();
    assert.equal((await putUpload(t, uploadKey, TEXT, 'text/plain', { token: ann.token })).status, 200);
    await t.ok('UploadProbeRpc.finalize', { uploadKey }, { token: ann.token });
    const again = await t.call('UploadProbeRpc.finalize', { uploadKey }, { token: ann.token });
    assertRefused(again, 400, 'BAD_REQUEST', /already been used/);
    assertRefused(await putUpload(t, uploadKey, TEXT, 'text/plain', { token: ann.token }), 400, 'BAD_REQUEST', /already been used/);
  });

  it('an expired key takes no files and cannot be finalized', async () => {
    const uploadKey = await probeKey();
    assert.equal((await putUpload(t, uploadKey, TEXT, 'text/plain', { token: ann.token })).status, 200);
    await t.app.deps.db.execute(`update core_upload_key set expires_at = now() - interval '1 second' where user_id = ? and used_at is null`, [ann.user._id]);
    assertRefused(await putUpload(t, uploadKey, TEXT, 'text/plain', { token: ann.token }), 400, 'BAD_REQUEST', /expired/);
    assertRefused(await t.call('UploadProbeRpc.finalize', { uploadKey }, { token: ann.token }), 400, 'BAD_REQUEST', /expired/);
  });

  it('a key works only for the user it was made for, in its own subscription', async () => {
    const uploadKey = await probeKey();
    const colleague = await addUser(t, ann.subscriptionId, 'admin');
    for (const stranger of [colleague, other]) {
      assertRefused(await putUpload(t, uploadKey, TEXT, 'text/plain', { token: stranger.token }), 404, 'NOT_FOUND', /Upload key not found/);
      assertRefused(await t.call('UploadProbeRpc.finalize', { uploadKey }, { token: stranger.token }), 404, 'NOT_FOUND');
    }
    for (const made of ['x'.repeat(43), 'not-a-key', uploadKey.slice(0, -1)]) {
      assertRefused(await putUpload(t, made, TEXT, 'text/plain', { token: ann.token }), 404, 'NOT_FOUND');
    }
    // Still intact for its owner.
    assert.equal((await putUpload(t, uploadKey, TEXT, 'text/plain', { token: ann.token })).status, 200);
    assert.equal((await t.ok('UploadProbeRpc.finalize', { uploadKey }, { token: ann.token })).length, 1);
  });

  it('a key of one purpose does not finalize another', async () => {
    const profileKey = (await t.as(ann).UserProfileRpc.getUploadKeyForProfilePicture()).uploadKey;
    assert.equal((await putUpload(t, profileKey, tinyPng(), 'image/png', { token: ann.token })).status, 200);
    const wrong = await t.call('UploadProbeRpc.finalize', { uploadKey: profileKey }, { token: ann.token });
    assertRefused(wrong, 400, 'BAD_REQUEST', /profile-picture uploads, not probe-docs/);
  });

  it('another subscription can neither read a file nor use the key', async () => {
    const png = tinyPng(4);
    const uploadKey = await probeKey();
    const { fileId } = dataOf((await putUpload(t, uploadKey, png, 'image/png', { token: ann.token })).body).files[0]!;
    await t.ok('UploadProbeRpc.finalize', { uploadKey }, { token: ann.token });
    const read = await getFile(t, `/api/files/${fileId}`, { token: other.token });
    assert.equal(read.status, 404);
    const body = JSON.parse(read.bytes.toString());
    assert.deepEqual(body, { success: false, data: { error: `File ${fileId} not found`, code: 'NOT_FOUND' } });
    assert.equal((await getFile(t, `/api/files/${fileId}`, { token: ann.token })).status, 200);
  });

  it('answers 404 in the envelope for an unknown or malformed file id', async () => {
    for (const id of ['00000000-0000-4000-8000-000000000000', 'nonsense', '..%2F..%2Fmaster.key']) {
      const read = await getFile(t, `/api/files/${id}`, { token: ann.token });
      assert.equal(read.status, 404, id);
      assert.equal(JSON.parse(read.bytes.toString()).data.code, 'NOT_FOUND');
    }
  });

  it('needs a credential: none or a bad one is 401, an API key works like a session', async () => {
    const uploadKey = await probeKey();
    for (const credential of [{}, { token: 'not-a-session' }, { apiKey: 'ak0000000000000_nope' }]) {
      assertRefused(await putUpload(t, uploadKey, TEXT, 'text/plain', credential), 401, 'UNAUTHENTICATED');
      assertRefused(await postUpload(t, uploadKey, [{ bytes: TEXT, type: 'text/plain', name: 'a.txt' }], credential), 401, 'UNAUTHENTICATED');
    }
    const key = await t.as(ann).ApiKeyRpc.create({ description: 'uploader' });
    const put = await putUpload(t, uploadKey, TEXT, 'text/plain', { apiKey: key.fullKey });
    assert.equal(put.status, 200);
    await t.ok('UploadProbeRpc.finalize', { uploadKey }, { apiKey: key.fullKey });
    const { fileId } = dataOf(put.body).files[0]!;
    const anonymous = await getFile(t, `/api/files/${fileId}`);
    assert.equal(anonymous.status, 401);
    assert.equal(JSON.parse(anonymous.bytes.toString()).data.code, 'UNAUTHENTICATED');
    const served = await getFile(t, `/api/files/${fileId}`, { apiKey: key.fullKey });
    assert.ok(served.bytes.equals(TEXT));
    assert.equal(served.headers.get('content-type'), 'text/plain');
    assert.match(served.headers.get('content-disposition')!, /^attachment/);
  });

  it('an upload cut off by the client leaves nothing behind', async () => {
    const carol = await t.signup();
    const uploadKey = await probeKey(carol);
    for (const multipart of [false, true]) {
      const socket = connect(Number(new URL(t.url).port), '127.0.0.1');
      await new Promise((resolve) => socket.once('connect', resolve));
      const boundary = 'cut-off-boundary';
      const head = multipart ? `--${boundary}\r\nContent-Disposition: form-data; name="file"; filename="a.txt"\r\nContent-Type: text/plain\r\n\r\n` : '';
      socket.write(
        `${multipart ? 'POST' : 'PUT'} /api/uploads/${uploadKey} HTTP/1.1\r\nHost: localhost\r\nAuthorization: Bearer ${carol.token}\r\n` +
          `Content-Type: ${multipart ? `multipart/form-data; boundary=${boundary}` : 'text/plain'}\r\nContent-Length: 5000\r\n\r\n` +
          `${head}${'x'.repeat(1000)}`,
      );
      // Let the first bytes reach storage, then hang up mid-body.
      for (let waited = 0; (await storedFiles(t, carol.subscriptionId)).length === 0 && waited < 2000; waited += 20) await sleep(20);
      assert.equal((await storedFiles(t, carol.subscriptionId)).length, 1, 'a partial file was being written');
      socket.destroy();
      for (let waited = 0; (await storedFiles(t, carol.subscriptionId)).length > 0 && waited < 2000; waited += 20) await sleep(20);
      assert.deepEqual(await storedFiles(t, carol.subscriptionId), []);
    }
    assert.deepEqual(await fileRows(t, carol.subscriptionId), []);
    assert.equal((await putUpload(t, uploadKey, TEXT, 'text/plain', { token: carol.token })).status, 200, 'the key is intact');
  });

  it('stores upload keys only as hashes', async () => {
    const uploadKey = await probeKey(other);
    const rows = await t.app.deps.db.execute('select * from core_upload_key where user_id = ?', [other.user._id]);
    assert.equal(rows.length, 1);
    assert.ok(!JSON.stringify(rows).includes(uploadKey));
    assert.equal(rows[0]!.key_hash, sha256(Buffer.from(uploadKey)));
  });

  it('the sweep removes files never finalized once their key expired, and keeps finalized ones', async () => {
    const kept = await probeKey(other);
    const keptId = dataOf((await putUpload(t, kept, TEXT, 'text/plain', { token: other.token })).body).files[0]!.fileId;
    await t.ok('UploadProbeRpc.finalize', { uploadKey: kept }, { token: other.token });
    const abandoned = await probeKey(other);
    const abandonedId = dataOf((await putUpload(t, abandoned, TEXT, 'text/plain', { token: other.token })).body).files[0]!.fileId;
    assert.deepEqual((await storedFiles(t, other.subscriptionId)).sort(), [keptId, abandonedId].sort());

    assert.equal(await t.app.deps.uploadService.sweep(), 0, 'nothing is swept while keys are valid');
    await t.app.deps.db.execute(`update core_upload_key set expires_at = now() - interval '2 minutes' where user_id = ?`, [other.user._id]);
    assert.equal(await t.app.deps.uploadService.sweep(), 1);
    assert.deepEqual(await storedFiles(t, other.subscriptionId), [keptId]);
    assert.deepEqual(
      (await fileRows(t, other.subscriptionId)).map((row) => row.id),
      [keptId],
    );
    const keys = await t.app.deps.db.execute('select id from core_upload_key where user_id = ?', [other.user._id]);
    assert.equal(keys.length, 0);
    assert.equal((await getFile(t, `/api/files/${keptId}`, { token: other.token })).status, 200);
  });
});

describe('upload limits', () => {
  let t: TestApp;
  let ann: Account;
  const LIMIT = 1024;

  before(async () => {
    t = await startTestApp({ extraPlugins: [probePlugin], env: { UPLOAD_MAX_BYTES: String(LIMIT), UPLOAD_KEY_TTL_SECONDS: '120' } });
    ann = await t.signup();
  });
  after(() => t.close());

  const probeKey = async () => (await t.ok('UploadProbeRpc.getKey', {}, { token: ann.token })).uploadKey as string;
  const bigText = Buffer.alloc(LIMIT + 1, 'a');

  it('UPLOAD_KEY_TTL_SECONDS sets how long a key lives', async () => {
    const { expiresAt } = await t.ok('UploadProbeRpc.getKey', {}, { token: ann.token });
    const ttl = Date.parse(expiresAt) - Date.now();
    assert.ok(ttl > 110_000 && ttl <= 120_000, String(ttl));
  });

  it('a file over UPLOAD_MAX_BYTES is refused with 413, declared or streamed, and nothing is kept', async () => {
    const uploadKey = await probeKey();
    assertRefused(await putUpload(t, uploadKey, bigText, 'text/plain', { token: ann.token }), 413, 'PAYLOAD_TOO_LARGE', /1024 bytes/);

    // No Content-Length: the limit is enforced while the bytes stream in.
    const chunks = [bigText.subarray(0, 600), bigText.subarray(600)];
    const streamed = await fetch(`${t.url}/api/uploads/${uploadKey}`, {
      method: 'PUT',
      headers: { 'content-type': 'text/plain', authorization: `Bearer ${ann.token}` },
      body: new ReadableStream({
        pull(controller) {
          const next = chunks.shift();
          if (next) controller.enqueue(next);
          else controller.close();
        },
      }),
      duplex: 'half',
    } as RequestInit);
    assertRefused({ status: streamed.status, body: await streamed.json() }, 413, 'PAYLOAD_TOO_LARGE');

    const posted = await postUpload(t, uploadKey, [{ bytes: bigText, type: 'text/plain', name: 'big.txt' }], { token: ann.token });
    assertRefused(posted, 413, 'PAYLOAD_TOO_LARGE');

    assert.deepEqual(await storedFiles(t, ann.subscriptionId), []);
    assert.deepEqual(await fileRows(t, ann.subscriptionId), []);
    const fits = await putUpload(t, uploadKey, bigText.subarray(0, LIMIT), 'text/plain', { token: ann.token });
    assert.equal(fits.status, 200, JSON.stringify(fits.body));
    assert.equal(dataOf(fits.body).files[0]!.size, LIMIT);
  });
});
