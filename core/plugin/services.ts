import type { Credentials } from '../credentials/credentials.ts';
import type { AiClient } from '../ai/ai-client.ts';
import type { AiCatalogue } from '../ai/catalogue.ts';
import type { ToolCatalogue } from '../rpc/tools.ts';
import type { OperationCaller } from '../rpc/caller.ts';
import type { CollectionCatalogue } from '../records/collections.ts';
import type { DataScopeCatalogue } from '../records/data-scopes.ts';
import type { DataFolders } from '../base/data-folders.ts';
import type { AuditLog } from '../audit/audit-log.ts';
import type { SecretBox } from '../credentials/crypto.ts';
import type { Keyring } from '../credentials/keyring.ts';
import type { Database } from '../db/orm.ts';
import type { EventBus } from '../events/bus.ts';
import type { Outbound } from '../base/outbound.ts';
import type { HttpHelpers } from '../doors/request-info.ts';
import type { JobQueue, Jobs } from '../jobs/job-service.ts';
import type { Logger } from '../base/logger.ts';
import type { WorkerPool } from '../pool/worker-pool.ts';
import type { RateLimiter } from '../rate-limits/rate-limiter.ts';
import type { UploadService } from '../uploads/upload-service.ts';
import type { Extensions } from '../base/extension-points.ts';

/** The root services of the core a plugin may name in `deps`. */
export interface CoreServices {
  db: Database;
  bus: EventBus;
  pool: WorkerPool;
  uploadService: UploadService;
  /** Short-lived values of no subscription, under the master key. */
  secretBox: SecretBox;
  /** A subscription's values at rest, under its own data key. */
  keyring: Keyring;
  /** Who read or changed what, written in the transaction of the change. */
  audit: AuditLog;
  /** The AI providers, models, defaults and recommendations (config/ai-catalogue.json or AI_CATALOGUE_FILE), read-only. */
  aiCatalogue: Readonly<AiCatalogue>;
  /** The tools agents may be given (the `core.tools` extension point), with their operations' params schemas. */
  tools: ToolCatalogue;
  /** Collections of records forms pick values from (the `core.collections` extension point). */
  collections: CollectionCatalogue;
  /** Records plugins keep as files of versioned data scopes (the `core.dataScopes` extension point). */
  dataScopes: DataScopeCatalogue;
  /** Folders under DATA_DIR for a plugin's files. */
  dataFolders: DataFolders;
  /** Calls operations in the process as a given principal (what a user's workflow or scheduled task does for them), with the endpoint's checks. */
  operations: OperationCaller;
  /** Embeddings and chat completions by catalogue model id, each call a telemetry trace. */
  ai: AiClient;
  rateLimiter: RateLimiter;
  credentials: Credentials;
  http: HttpHelpers;
  /** HTTP requests made for tenants, to public addresses only (unless the operator allows more). */
  outbound: Outbound;
  /** The plugin's own background jobs (those in its definition's `jobs`), by their names. */
  jobs: Jobs;
  /** The jobs of every plugin as one subscription's admins see them: states and failures, never data. */
  jobQueue: JobQueue;
}

export const CORE_SERVICE_NAMES = [
  'db',
  'bus',
  'pool',
  'uploadService',
  'secretBox',
  'keyring',
  'audit',
  'aiCatalogue',
  'tools',
  'collections',
  'dataScopes',
  'dataFolders',
  'operations',
  'ai',
  'rateLimiter',
  'credentials',
  'http',
  'outbound',
  'jobs',
  'jobQueue',
] as const satisfies readonly (keyof CoreServices)[];

/**
 * Services that plugins export to each other (`exports` in definePlugin). The
 * exporting plugin adds each by declaration merging:
 *
 *   declare module 'rpc-service/plugin' {
 *     interface PluginServices { userService: UserService }
 *   }
 */
// eslint-disable-next-line @typescript-eslint/no-empty-object-type -- empty here, filled by declaration merging
export interface PluginServices {}

export type ServiceName = keyof CoreServices | keyof PluginServices;

/** What every plugin receives besides the services it names: its own settings, logger and extension points. */
export interface PluginScope<C> {
  config: C;
  logger: Logger;
  extensions: Extensions;
}

/** Names no plugin service may take: the per-plugin scope. */
export const SCOPE_NAMES = ['config', 'logger', 'extensions'] as const;

/**
 * The typed deps of a plugin: the services it names, its own services and its scope.
 *
 *   const DEPS = ['db', 'bus'] as const;
 *   type NoteDeps = Deps<typeof DEPS, { noteService: NoteService }, NotesConfig>;
 */
export type Deps<Names extends readonly ServiceName[], Own extends object = object, Config = unknown> = Pick<CoreServices & PluginServices, Names[number]> &
  Own &
  PluginScope<Config>;
