import type { EntitySchema } from '@mikro-orm/core';
import type Router from '@koa/router';
import type { Resolver } from 'awilix';
import type { Cradle } from '../container.ts';
import type { MigrationDef } from '../db/migration.ts';
import type { BusEvent } from '../events/bus.ts';
import type { Operation } from '../rpc/operation.ts';
import type { LifecycleHookSet } from './hooks.ts';

export type EventSubscriber = (event: BusEvent, deps: Cradle) => void | Promise<void>;

export interface PluginDefinition {
  /** kebab-case, unique; prefixes the plugin's tables (`task-board` → `task_board_*`). */
  id: string;
  /** The RPC group; every operation becomes `<group>.<name>`. */
  group: string;
  /** Range of core versions the plugin works with (semver), checked at load. */
  coreVersion: string;
  /** Ids of plugins that must load first. */
  dependsOn?: string[];
  entities?: EntitySchema<any, any>[];
  migrations?: MigrationDef[];
  /** awilix registrations, e.g. `{ taskService: asClass(TaskService).singleton() }`. */
  services?: Record<string, Resolver<unknown>>;
  operations: Record<string, Operation>;
  /** Application lifecycle hooks (after signup, after login), awaited in load order. */
  hooks?: LifecycleHookSet;
  /** Event subscribers: event name (or `*`) → handler. */
  subscribers?: Record<string, EventSubscriber>;
  /**
   * HTTP routes outside /api/rpc (browser redirects such as OAuth callbacks),
   * mounted on the Koa side after the core's own.
   */
  routes?(router: Router, deps: Cradle): void;
  /** Runs after the database is migrated and before the server listens. */
  start?(deps: Cradle): void | Promise<void>;
  /** Runs on shutdown, in reverse load order. */
  stop?(deps: Cradle): void | Promise<void>;
}

export const PLUGIN_MARKER = Symbol.for('rpc-service.plugin');

export type Plugin = Readonly<PluginDefinition> & { readonly [PLUGIN_MARKER]: true };

export const definePlugin = (definition: PluginDefinition): Plugin =>
  Object.freeze({ ...definition, [PLUGIN_MARKER]: true as const });

export const isPlugin = (value: unknown): value is Plugin =>
  typeof value === 'object' && value !== null && (value as Record<symbol, unknown>)[PLUGIN_MARKER] === true;
