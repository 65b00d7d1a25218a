import assert from 'node:assert/strict';
import { createHash, randomBytes, randomUUID } from 'node:crypto';
import { PassThrough, Readable } from 'node:stream';
import { text } from 'node:stream/consumers';
import { after, before, describe, it } from 'node:test';
import { CHUNK_BYTES, DatabaseStorage } from '../../core/uploads/database-storage.ts';
import { startTestApp, type TestApp } from '../support/harness.ts';

/** A stream of `bytes` in pieces of uneven sizes, as a socket delivers them. */
function pieces(bytes: Buffer): Readable {
  const sizes = [1, 7, 65_536, 100_003, CHUNK_BYTES, 3];
  const out: Buffer[] = [];
  for (let at = 0, n = 0; at < bytes.length; n++) {
    const size = sizes[n % sizes.length]!;
    out.push(bytes.subarray(at, at + size));
    at += size;
  }
  return Readable.from(out);
}

const sha = (bytes: Buffer) => createHash('sha256').update(bytes).digest('hex');

describe('files in the database (DatabaseStorage)', () => {
  let t: TestApp;
  let storage: DatabaseStorage;
  const subscription = randomUUID();
  const pathOf = (id = randomUUID()) => `${subscription}/${id}`;

  const read = async (storagePath: string) => Buffer.concat(await (await storage.get(storagePath)).toArray());
  /** The subscription's chunks: how many, and whether each count is the number of parts naming it. */
  const chunks = async () => {
    const rows = await t.app.deps.db.execute<{ hash: string; refs: number; named: number }>(
      `select c.hash, c.refs, (select count(*)::int from core_blob_part p where p.subscription_id = c.subscription_id and p.hash = c.hash) as named
       from core_blob_chunk c where c.subscription_id = ?`,
      [subscription],
    );
    for (const row of rows) assert.equal(row.refs, row.named, `chunk ${row.hash.slice(0, 8)} counts ${row.refs}, named by ${row.named}`);
    return rows.length;
  };

  before(async () => {
    t = await startTestApp({ withNotes: false, plugins: ['auth'] });
    storage = new DatabaseStorage(t.app.deps.db);
  });
  after(() => t.close());

  it('stores a file a chunk at a time and gives back the same bytes, whatever the pieces it came in', async () => {
    const bytes = randomBytes(4 * CHUNK_BYTES + 17);
    const where = pathOf();
    await storage.put(where, pieces(bytes));
    assert.equal(sha(await read(where)), sha(bytes));
    assert.equal(await chunks(), 5);
    const empty = pathOf();
    await storage.put(empty, Readable.from([]));
    assert.equal((await read(empty)).length, 0);
    await storage.delete(where);
    await storage.delete(empty);
    assert.equal(await chunks(), 0);
  });

  it('keeps the same bytes once within a subscription, and deletes a chunk only when no file names it', async () => {
    const shared = randomBytes(CHUNK_BYTES);
    const first = pathOf();
    const second = pathOf();
    await storage.put(first, pieces(Buffer.concat([shared, Buffer.from('one')])));
    await storage.put(second, pieces(Buffer.concat([shared, Buffer.from('two')])));
    assert.equal(await chunks(), 3, 'the shared chunk once, and the two tails');
    await storage.delete(first);
    assert.equal(await chunks(), 2);
    assert.equal((await read(second)).subarray(CHUNK_BYTES).toString(), 'two');
    await storage.delete(second);
    assert.equal(await chunks(), 0);
  });

  it('reads nothing of a file until it is whole, and leaves nothing of one that fails', async () => {
    const where = pathOf();
    const incoming = new PassThrough();
    const writing = storage.put(where, incoming);
    incoming.write(randomBytes(CHUNK_BYTES + 10));
    await new Promise((resolve) => setTimeout(resolve, 100));
    await assert.rejects(storage.get(where), { code: 'ENOENT' });
    incoming.end(Buffer.from('the end'));
    await writing;
    assert.equal((await read(where)).subarray(CHUNK_BYTES + 10).toString(), 'the end');
    await storage.delete(where);

    const failing = new PassThrough();
    const failed = storage.put(pathOf(), failing);
    failing.write(randomBytes(2 * CHUNK_BYTES));
    failing.destroy(new Error('the client went away'));
    await assert.rejects(failed, /went away/);
    assert.equal(await chunks(), 0);
    const [{ blobs }] = await t.app.deps.db.execute<{ blobs: number }>('select count(*)::int as blobs from core_blob where subscription_id = ?', [
      subscription,
    ]);
    assert.equal(blobs, 0);
  });

  it('sweeps what a writer that stopped mid-file left behind, and only that', async () => {
    const kept = pathOf();
    await storage.put(kept, Readable.from([Buffer.from('kept')]));
    // A node that died mid-upload: an incomplete blob with a part, as its last statement left them.
    const abandoned = randomUUID();
    await t.app.deps.db.execute("insert into core_blob values (?, ?, 0, 0, false, now() - interval '1 hour')", [subscription, abandoned]);
    const incoming = new PassThrough();
    const stillWriting = storage.put(pathOf(), incoming);
    incoming.write(randomBytes(CHUNK_BYTES));
    await new Promise((resolve) => setTimeout(resolve, 100));
    assert.equal(await storage.sweep(new Date(Date.now() - 60_000)), 1, 'the abandoned one, not the one being written');
    incoming.end();
    await stillWriting;
    assert.equal(await text(await storage.get(kept)), 'kept');
  });

  it('keeps counts right when files with the same bytes are stored and deleted at once', async () => {
    const before = await chunks();
    const content = randomBytes(2 * CHUNK_BYTES);
    const standing = pathOf();
    await storage.put(standing, pieces(content));
    const paths = Array.from({ length: 12 }, () => pathOf());
    await Promise.all(paths.map((where) => storage.put(where, pieces(content))));
    await Promise.all(paths.flatMap((where, index) => (index % 2 ? [storage.delete(where)] : [storage.delete(where), storage.put(pathOf(), pieces(content))])));
    assert.equal(sha(await read(standing)), sha(content));
    assert.equal(await chunks(), before + 2);
  });
});
