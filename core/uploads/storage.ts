import { createWriteStream } from 'node:fs';
import { mkdir, open, readdir, rename, rm, stat } from 'node:fs/promises';
import path from 'node:path';
import type { Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { makeDataFolder } from '../base/config.ts';

/**
 * Where file bytes live. Paths are made by the upload service from ids it
 * generated (`<subscriptionId>/<fileId>`), never from what a client sent.
 */
export interface FileStorage {
  /** Stores everything `content` yields; on failure nothing is left behind. */
  put(storagePath: string, content: Readable): Promise<void>;
  /** The stored bytes; rejects when they are missing. */
  get(storagePath: string): Promise<Readable>;
  /** Removes the bytes; a missing file is not an error. */
  delete(storagePath: string): Promise<void>;
  /** Removes what writes that never finished before `cutoff` left behind; how many. */
  sweep(cutoff: Date): Promise<number>;
}

const SAFE_PATH = /^([0-9a-f-]{36})\/([0-9a-f-]{36})$/;

/** The subscription and file id of a storage path; anything else is a bug, not a file to touch. */
export function parseStoragePath(storagePath: string): { subscriptionId: string; id: string } {
  const match = SAFE_PATH.exec(storagePath);
  if (!match) throw new Error(`Refusing storage path ${JSON.stringify(storagePath)}`);
  return { subscriptionId: match[1]!, id: match[2]! };
}

/** Files on the local disk under one root folder (`DATA_DIR/files`). */
export class DiskStorage implements FileStorage {
  readonly #root: string;

  constructor(root: string) {
    this.#root = path.resolve(root);
    // Made at start, so a DATA_DIR that cannot hold files stops start-up rather than every upload.
    makeDataFolder(this.#root);
  }

  async put(storagePath: string, content: Readable): Promise<void> {
    const target = this.#resolve(storagePath);
    await mkdir(path.dirname(target), { recursive: true, mode: 0o700 });
    // Written under a temporary name and renamed, so a reader never sees half a file.
    const partial = `${target}.part`;
    try {
      await pipeline(content, createWriteStream(partial, { mode: 0o600, flags: 'wx' }));
      await rename(partial, target);
    } catch (error) {
      await rm(partial, { force: true });
      throw error;
    }
  }

  async get(storagePath: string): Promise<Readable> {
    const handle = await open(this.#resolve(storagePath), 'r');
    return handle.createReadStream();
  }

  async delete(storagePath: string): Promise<void> {
    await rm(this.#resolve(storagePath), { force: true });
  }

  async sweep(cutoff: Date): Promise<number> {
    let removed = 0;
    for (const entry of await readdir(this.#root, { recursive: true, withFileTypes: true })) {
      if (!entry.isFile() || !entry.name.endsWith('.part')) continue;
      const file = path.join(entry.parentPath, entry.name);
      if ((await stat(file)).mtime < cutoff) {
        await rm(file, { force: true });
        removed++;
      }
    }
    return removed;
  }

  #resolve(storagePath: string): string {
    parseStoragePath(storagePath);
    return path.join(this.#root, storagePath);
  }
}
