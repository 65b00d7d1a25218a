/**
 * `rpc-service/plugin`: everything a plugin may use from the core, in one
 * import. Built-in plugins use it exactly as a third-party package would; a
 * test keeps files under plugins/ from importing anything else of the core.
 */

// The contract
export { definePlugin, type Plugin, type PluginDefinition, type EventSubscriber, type ConfigSchema } from './define.ts';
export {
  defineOperation,
  operationBuilder,
  envelope,
  type Access,
  type OperationKind,
  type Transport,
  type CookieOptions,
  type HandlerArgs,
} from '../rpc/operation.ts';
export {
  defineExtensionPoint,
  type ExtensionPoint,
  type ExtensionPoints,
  type ExtensionPointId,
  type Contribution,
  type Contributions,
  type Extensions,
} from '../base/extension-points.ts';
export type { Deps, CoreServices, PluginServices, ServiceName, PluginScope } from './services.ts';
export { env, setting, settings, splitList, type Setting } from '../base/settings.ts';
export {
  defineJob,
  jobBuilder,
  type Job,
  type JobDefinition,
  type JobHandlerArgs,
  type JobRun,
  type Jobs,
  type JobQueue,
  type EnqueueOptions,
  type RetryPolicy,
} from '../jobs/job-service.ts';
export type { JobView, JobState, QueueCounts, SubscriptionJob } from '../jobs/job-views.ts';

// Errors, params and lists
export {
  RpcError,
  counted,
  notFound,
  conflict,
  forbidden,
  badRequest,
  unauthenticated,
  validationError,
  type ErrorCode,
  type PluginErrorCodes,
  type ValidationIssue,
} from '../base/errors.ts';
export {
  recordId,
  trimmedText,
  stringList,
  isoTime,
  wireTimestamp,
  currencyCode,
  minorUnits,
  MAX_MINOR_UNITS,
  jsonObjectText,
  email,
  password,
  username,
  isUuid,
  topK,
} from '../base/schemas.ts';
export {
  listParams,
  requiredListParams,
  toWhere,
  toOrderBy,
  pageOf,
  listOf,
  pageSchema,
  listSchema,
  MAX_PAGE_SIZE,
  type FieldMap,
  type FieldType,
  type ListQuery,
  type Page,
  type ListEnvelope,
} from '../records/list-query.ts';
export { defineRecord, fieldsOf, type FieldsOf, type InferRecord, type RecordOf, type RecordView } from '../records/records.ts';
export type { AuthenticatedContext, RequestContext, Principal, Door } from '../base/context.ts';
export type { Caller, OperationCaller } from '../rpc/caller.ts';
export { ROLES, isManager, mayChangeRecordOf, commonRole, type Role } from '../../config/roles.ts';
export { actingPrincipal, authorOf, withAuthor, withBound, commonScopes, type Author, type ChainLink, type HolderOf } from '../rpc/authority.ts';

// Data
export { defineEntity, LockMode, type InferEntity } from '@mikro-orm/core';
export type { EntityManager } from '@mikro-orm/postgresql';
export { SHARED_TABLES } from './core-entities.ts';
export { rowTimestamp } from '../db/row-timestamp.ts';
export { preparedRead, type Database, type PreparedRead } from '../db/orm.ts';
export type { RowOf } from '../db/rows.ts';
export { Migration, type MigrationClass } from '../db/migration.ts';
export { ACROSS_TENANTS } from '../db/tenant.ts';
export { VectorType, vectorLiteral } from '../ai/vector-type.ts';
export { jsonFilter, type SqlCondition } from '../records/json-filter.ts';
export { nearest, type NearestQuery, type NearestRow } from '../ai/vector-search.ts';
export {
  rankBy,
  rankByWords,
  fuseRankings,
  SEARCH_MODES,
  COMMON_ROWS,
  FUSION_DEPTH,
  RARE_WINDOW,
  TEXT_WINDOW,
  type FusedRow,
  type RankedRow,
  type SearchMode,
  type WordRankingQuery,
} from '../ai/ranking.ts';
export { pgArray } from '../db/pg-array.ts';
export { GroupWrite } from '../db/group-write.ts';
export { onFirstUse } from '../base/on-first-use.ts';
export { modulePath, sourcePath } from '../base/paths.ts';

// Credentials and crypto
export {
  SESSION_COOKIE,
  ACCESS_TOKEN_PREFIX,
  type CredentialVerifier,
  type CredentialScheme,
  type CredentialSchemeContribution,
} from '../credentials/authenticator.ts';
export type { Credentials } from '../credentials/credentials.ts';
export type { CredentialCache, CachedCredential } from '../credentials/credential-cache.ts';
export type { CredentialsChanged } from '../credentials/revocation.ts';
export { sha256, sha256Hex, randomToken, digestsEqual, type SecretBox } from '../credentials/crypto.ts';
export type { Keyring } from '../credentials/keyring.ts';
export type {
  AiClient,
  AiCall,
  AiCallRecorder,
  AiCaller,
  AiCallOptions,
  ChatMessage,
  ChatOptions,
  ChatResult,
  EmbedResult,
  EmbeddingProvider,
  Usage,
} from '../ai/ai-client.ts';
export {
  EmbeddingColumns,
  switchModelJob,
  type EmbeddedTable,
  type EmbeddingSlots,
  type EmbeddingProgress,
  type SwitchOutcome,
  type VectorColumn,
} from '../ai/embedding-columns.ts';
export type { ToolCatalogue, ToolDeclaration, ToolListing } from '../rpc/tools.ts';
export { executeToolAttributes } from '../base/tracing.ts';
export { unsafeInputIssues } from '../base/input-guard.ts';
export { expandTemplate, type ResourceCall, type ResourceContent, type ResourceDeclaration, type ResourceEntry } from '../rpc/resources.ts';
export { entityScope, SCOPE_NAME, type DataScopeCatalogue, type DataScope, type DataScopeDeclaration, type ScopeFiles } from '../records/data-scopes.ts';
export type { DataFolders } from '../base/data-folders.ts';
export {
  MAX_FIELD_VALUES,
  fieldValuesParams,
  collectionFieldValuesParams,
  type CollectionCatalogue,
  type CollectionDeclaration,
  type FieldReference,
} from '../records/collections.ts';
export { EMBEDDING_DIMENSIONS, type AiCatalogue, type AiModel, type AiProvider, type AiRecommendation } from '../ai/catalogue.ts';
export { AUDIT_FIELDS, AUDIT_RECORD, type AuditLog, type AuditAction, type AuditRecord } from '../audit/audit-log.ts';
export { RateLimiter, type Limit } from '../rate-limits/rate-limiter.ts';

// Events, uploads, workers, HTTP
export { Outbound, OutboundRefusedError, isPublicAddress, type OutboundInit, type OutboundPolicy } from '../base/outbound.ts';
export type { BusEvent, EventBus, PublishInput } from '../events/bus.ts';
export type { EventDeclaration } from '../events/catalogue.ts';
export {
  fileUrl,
  fileIdOfUrl,
  UPLOAD_KEY_ANSWER,
  UPLOAD_KEY_WITH_LIMITS,
  type UploadService,
  type PurposeLimits,
  type FileInfo,
  type IssuedUploadKey,
} from '../uploads/upload-service.ts';
export { WorkerTaskError, type WorkerFailure, type WorkerPool } from '../pool/worker-pool.ts';
export type { HttpHelpers } from '../doors/request-info.ts';
export type { default as Router } from '@koa/router';
export type { Context as RouteContext } from 'koa';
export type { Logger } from '../base/logger.ts';
