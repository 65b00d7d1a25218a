import path from 'node:path';
import { makeDataFolder } from './config.ts';

/** Folders of DATA_DIR that plugins keep files in, each private to the service's user. */
export class DataFolders {
  readonly #dataDir: string;

  constructor(dataDir: string) {
    this.#dataDir = dataDir;
  }

  /** DATA_DIR/<name>, made on first use; a name is one folder, never a path. */
  folder(name: string): string {
    if (!/^[a-z0-9][a-z0-9_-]{0,63}$/.test(name)) throw new TypeError(`Data folder "${name}": a name is lower-case letters, digits, _ and -`);
    const folder = path.join(this.#dataDir, name);
    makeDataFolder(folder);
    return folder;
  }
}
