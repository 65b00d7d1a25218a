import { existsSync } from 'node:fs';
import path from 'node:path';
import { DatabaseStorage } from '../uploads/database-storage.ts';
import { DiskStorage } from '../uploads/storage.ts';
import { OperatorError, type OperatorCommand } from './command.ts';

export interface FilesToDatabaseResult {
  /** Files whose bytes were copied into the database and removed from disk. */
  moved: number;
  bytes: number;
  /** Files already in the database (a copy left on disk by an interrupted run is removed). */
  already: number;
  /** Files whose bytes are in neither place: their upload never finished, or the disk lost them. */
  missing: number;
}

/** Rows read per statement while walking every subscription's files. */
const PAGE = 500;

/**
 * `files to-database`: the uploads an installation kept on disk
 * (DATA_DIR/files) moved into its database, so that nodes need no shared
 * folder (core/uploads/database-storage.ts). Run after setting
 * FILE_STORAGE=database: until a file is moved, that storage reads it from
 * disk, so the service serves every file throughout. Each file is copied,
 * then deleted from disk; a run stopped half-way is run again.
 */
export const filesToDatabase: OperatorCommand<Record<string, never>, FilesToDatabaseResult> = {
  async run(app, _args, report) {
    if (app.config.fileStorage !== 'database') {
      throw new OperatorError('FILE_STORAGE is not database: set FILE_STORAGE=database (and restart the service with it) first');
    }
    const { db } = app.deps;
    const folder = path.join(app.config.dataDir, 'files');
    const result: FilesToDatabaseResult = { moved: 0, bytes: 0, already: 0, missing: 0 };
    if (!existsSync(folder)) return result;
    const disk = new DiskStorage(folder);
    const database = new DatabaseStorage(db);
    const [{ total }] = await db.execute<{ total: number }>('select count(*)::int as total from core_file');
    let done = 0;
    for (let after = ''; ;) {
      const files = await db.execute<{ id: string; subscription_id: string; storage_path: string; size: number }>(
        'select id, subscription_id, storage_path, size from core_file where id::text > ? order by id::text limit ?',
        [after, PAGE],
      );
      if (files.length === 0) break;
      for (const file of files) {
        const [stored] = await db.execute('select 1 from core_blob where subscription_id = ? and id = ? and complete', [file.subscription_id, file.id]);
        const onDisk = existsSync(path.join(folder, file.storage_path));
        if (stored) result.already++;
        else if (onDisk) {
          await database.put(file.storage_path, await disk.get(file.storage_path));
          result.moved++;
          result.bytes += Number(file.size);
        } else result.missing++;
        // Only once the database holds the bytes: a reader that opened the disk copy reads it to the end.
        if (onDisk) await disk.delete(file.storage_path);
        report({ label: 'files', done: ++done, total: Math.max(total, done), unit: 'items' });
      }
      after = files.at(-1)!.id;
    }
    return result;
  },
};
