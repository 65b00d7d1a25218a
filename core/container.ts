import { createContainer, InjectionMode, type AwilixContainer } from 'awilix';
import type { Config } from './config.ts';
import type { Database } from './db/orm.ts';
import type { Logger } from './logger.ts';

/**
 * Everything a handler or service can ask for by name. Core services are
 * declared here; a plugin adds its own by augmenting this interface:
 *
 *   declare module '../../core/container.ts' {
 *     interface Cradle { noteService: NoteService }
 *   }
 */
export interface Cradle {
  config: Config;
  logger: Logger;
  db: Database;
}

export type Container = AwilixContainer<Cradle>;

export const createAppContainer = (): Container =>
  createContainer<Cradle>({ injectionMode: InjectionMode.PROXY, strict: true });
