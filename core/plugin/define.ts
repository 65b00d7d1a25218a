import type Router from '@koa/router';
import type { Resolver } from 'awilix';
import type * as v from 'valibot';
import type { BusEvent } from '../events/bus.ts';
import type { Job } from '../jobs/job-service.ts';
import type { Operation } from '../rpc/operation.ts';
import type { Contributions, ExtensionPoint } from '../base/extension-points.ts';
import type { ServiceName } from './services.ts';
import type { AnyEntitySchema } from '../db/any-entity.ts';
import type { MigrationClass } from '../db/migration.ts';

type SettingsObject =
  | v.ObjectSchema<v.ObjectEntries, v.ErrorMessage<v.ObjectIssue> | undefined>
  | v.LooseObjectSchema<v.ObjectEntries, v.ErrorMessage<v.LooseObjectIssue> | undefined>;

/**
 * The environment settings of a plugin: a valibot object whose keys are the
 * variable names, optionally piped into the shape the plugin wants.
 */
export type ConfigSchema = SettingsObject | v.SchemaWithPipe<readonly [SettingsObject, ...v.GenericPipeItem[]]>;

export type EventSubscriber<D = unknown> = (event: BusEvent, deps: D) => void | Promise<void>;

export interface PluginDefinition<D = unknown> {
  /** kebab-case, unique; prefixes the plugin's tables (`task-board` → `task_board` or `task_board_*`). */
  id: string;
  /** The RPC group; every operation becomes `<group>.<name>`. */
  group: string;
  /**
   * The plugin takes part in signing people in (a second factor, a passkey):
   * like AuthRpc, it may declare `public` operations, which a person calls
   * before they have a session. No other plugin may.
   */
  signIn?: boolean;
  /** Range of core versions the plugin works with (semver), checked at load. */
  coreVersion: string;
  /** Ids of plugins that must load first (besides those whose services or extension points it uses). */
  dependsOn?: readonly string[];
  /** The plugin's own environment settings, validated at start; handlers and services get them as `deps.config`. */
  config?: ConfigSchema;
  /**
   * Error codes of its own with their HTTP status, e.g. `{ WORKFLOW_FAILED: 422 }`:
   * UPPER_SNAKE_CASE, 400 to 599, neither a core code nor another plugin's
   * (refused at load). Declared in `PluginErrorCodes` too, so
   * `new RpcError('WORKFLOW_FAILED', ...)` type-checks; answered like a core code.
   */
  errors?: Readonly<Record<string, number>>;
  /** Core services and services exported by other plugins that this plugin uses; it receives exactly these. */
  deps?: readonly ServiceName[];
  /** awilix registrations, e.g. `{ taskService: asClass(TaskService).singleton() }`; private unless exported. */
  services?: Record<string, Resolver<unknown>>;
  /** Names of its services other plugins may name in their `deps`. */
  exports?: readonly string[];
  /** Entities made with `defineEntity`; a `subscriptionId` property puts them under the tenant filter. */
  entities?: readonly AnyEntitySchema[];
  /** Generated from the entities by the MikroORM migrator, in order. */
  migrations?: readonly MigrationClass[];
  operations: Record<string, Operation>;
  /** Background jobs, each made by `defineJob`; the plugin enqueues them through its `jobs` dep by these names. */
  jobs?: Record<string, Job>;
  /** Points other plugins may contribute to; ids start with the plugin id (`auth.lifecycle`). */
  extensionPoints?: readonly ExtensionPoint[];
  /** Contributions to extension points of the core or of other plugins; a function of the plugin's deps when they use its services. */
  extends?: Contributions<D>;
  /** Event subscribers: event name (or `*`) → handler. */
  subscribers?: Record<string, EventSubscriber<D>>;
  /**
   * HTTP routes outside /api/rpc (browser redirects such as OAuth callbacks),
   * mounted on the Koa side after the core's own.
   */
  routes?(router: Router, deps: D): void;
  /** Runs after the database is migrated and before the server listens. */
  start?(deps: D): void | Promise<void>;
  /** Runs on shutdown, in reverse load order. */
  stop?(deps: D): void | Promise<void>;
}

export const PLUGIN_MARKER = Symbol.for('rpc-service.plugin');

export type Plugin = Readonly<PluginDefinition> & { readonly [PLUGIN_MARKER]: true };

/** Declares a plugin. `D` types the deps its hooks receive (see `Deps`). */
export const definePlugin = <D = unknown>(definition: PluginDefinition<D>): Plugin =>
  Object.freeze({ ...definition, [PLUGIN_MARKER]: true as const }) as Plugin;

export const isPlugin = (value: unknown): value is Plugin =>
  typeof value === 'object' && value !== null && (value as Record<symbol, unknown>)[PLUGIN_MARKER] === true;
