import { createHash } from 'node:crypto';
import { Readable } from 'node:stream';
import type { Database } from '../db/orm.ts';
import { parseStoragePath, type FileStorage } from './storage.ts';

/** The most bytes one chunk holds: a file is read and written a chunk at a time, never whole. */
export const CHUNK_BYTES = 256 * 1024;

/**
 * File bytes in the database (core/uploads/blob.entity.ts), so that every
 * node on one PostgreSQL serves every file with no shared folder.
 *
 * - Written a chunk at a time, each chunk one statement outside any
 *   transaction: a slow upload holds no connection between chunks. The blob
 *   row says `complete` only once every part is in; until then it is not
 *   read, and one left incomplete (its node stopped) is removed by `sweep`.
 * - Chunks are content-addressed within the subscription and counted: the
 *   same bytes uploaded twice are kept once. The count is changed under the
 *   chunk's row lock (insert ... on conflict do update, update), and a chunk is
 *   deleted only where its count is 0 when the delete takes the lock, so a
 *   writer that takes it up again at the same moment keeps it.
 * - `fallback` reads and deletes the files still on disk from before the
 *   installation moved its files here (`rpc-service files to-database`).
 */
export class DatabaseStorage implements FileStorage {
  readonly #db: Database;
  readonly #fallback: FileStorage | undefined;

  constructor(db: Database, fallback?: FileStorage) {
    this.#db = db;
    this.#fallback = fallback;
  }

  async put(storagePath: string, content: Readable): Promise<void> {
    const { subscriptionId, id } = parseStoragePath(storagePath);
    // The stream may fail while the row below is written, before the loop reads it: that must not go unheard, the loop then throws it.
    const heard = () => undefined;
    content.on('error', heard);
    await this.#db.execute('insert into core_blob (subscription_id, id, size, parts, complete, created_at) values (?, ?, 0, 0, false, now())', [
      subscriptionId,
      id,
    ]);
    let size = 0;
    let seq = 0;
    try {
      for await (const chunk of chunksOf(content)) {
        await this.#writePart(subscriptionId, id, seq++, chunk);
        size += chunk.length;
      }
      await this.#db.execute('update core_blob set size = ?, parts = ?, complete = true where subscription_id = ? and id = ?', [size, seq, subscriptionId, id]);
    } catch (error) {
      await this.#remove(subscriptionId, id);
      throw error;
    } finally {
      content.off('error', heard);
    }
  }

  async get(storagePath: string): Promise<Readable> {
    const { subscriptionId, id } = parseStoragePath(storagePath);
    const [blob] = await this.#db.execute<{ parts: number }>('select parts from core_blob where subscription_id = ? and id = ? and complete', [
      subscriptionId,
      id,
    ]);
    if (!blob) {
      if (this.#fallback) return this.#fallback.get(storagePath);
      throw Object.assign(new Error(`No stored file ${storagePath}`), { code: 'ENOENT' });
    }
    const db = this.#db;
    // One chunk in memory at a time, fetched as the reader asks for more.
    return Readable.from(
      (async function* () {
        for (let seq = 0; seq < blob.parts; seq++) {
          const [part] = await db.execute<{ data: Uint8Array }>(
            `select c.data from core_blob_part p join core_blob_chunk c on c.subscription_id = p.subscription_id and c.hash = p.hash
             where p.subscription_id = ? and p.blob_id = ? and p.seq = ?`,
            [subscriptionId, id, seq],
          );
          if (!part) throw new Error(`Stored file ${storagePath} lost its part ${seq}`);
          yield Buffer.from(part.data.buffer, part.data.byteOffset, part.data.byteLength);
        }
      })(),
      { objectMode: false },
    );
  }

  async delete(storagePath: string): Promise<void> {
    const { subscriptionId, id } = parseStoragePath(storagePath);
    await this.#remove(subscriptionId, id);
    await this.#fallback?.delete(storagePath);
  }

  /** Removes the blobs their writers left incomplete before `cutoff`: a node stopped, or its process died, mid-upload. */
  async sweep(cutoff: Date): Promise<number> {
    const stale = await this.#db.execute<{ subscription_id: string; id: string }>(
      'select subscription_id, id from core_blob where not complete and created_at < ?',
      [cutoff],
    );
    for (const blob of stale) await this.#remove(blob.subscription_id, blob.id);
    return stale.length + ((await this.#fallback?.sweep?.(cutoff)) ?? 0);
  }

  /** One part: its chunk stored or counted once more, and the part naming it, in one statement. */
  async #writePart(subscriptionId: string, blobId: string, seq: number, chunk: Buffer): Promise<void> {
    const hash = createHash('sha256').update(chunk).digest('hex');
    await this.#db.execute(
      `with chunk as (
         insert into core_blob_chunk (subscription_id, hash, size, refs, data) values (?, ?, ?, 1, ?)
         on conflict (subscription_id, hash) do update set refs = core_blob_chunk.refs + 1
         returning hash
       )
       insert into core_blob_part (subscription_id, blob_id, seq, hash) select ?, ?, ?, hash from chunk`,
      [subscriptionId, hash, chunk.length, chunk, subscriptionId, blobId, seq],
    );
  }

  /** The blob, its parts, and each chunk no other part names any more. */
  async #remove(subscriptionId: string, blobId: string): Promise<void> {
    const released = await this.#db.execute<{ hash: string }>(
      `with gone as (delete from core_blob where subscription_id = ? and id = ?),
            parts as (delete from core_blob_part where subscription_id = ? and blob_id = ? returning hash),
            counted as (select hash, count(*)::int as n from parts group by hash)
       update core_blob_chunk c set refs = c.refs - counted.n from counted where c.subscription_id = ? and c.hash = counted.hash
       returning c.hash`,
      [subscriptionId, blobId, subscriptionId, blobId, subscriptionId],
    );
    if (released.length === 0) return;
    // A statement of its own: the count a writer took up since the one above keeps the chunk.
    await this.#db.execute(`delete from core_blob_chunk where subscription_id = ? and refs <= 0 and hash in (${released.map(() => '?').join(', ')})`, [
      subscriptionId,
      ...released.map((chunk) => chunk.hash),
    ]);
  }
}

/** The bytes of `content` in chunks of CHUNK_BYTES (the last one shorter), whatever sizes the stream yields. */
async function* chunksOf(content: Readable): AsyncGenerator<Buffer> {
  let pending: Buffer[] = [];
  let held = 0;
  for await (const piece of content) {
    let data = Buffer.isBuffer(piece) ? piece : Buffer.from(piece as Uint8Array);
    while (held + data.length >= CHUNK_BYTES) {
      const take = CHUNK_BYTES - held;
      pending.push(data.subarray(0, take));
      yield Buffer.concat(pending);
      pending = [];
      held = 0;
      data = data.subarray(take);
    }
    if (data.length > 0) {
      pending.push(data);
      held += data.length;
    }
  }
  if (held > 0) yield Buffer.concat(pending);
}
