/**
 * Everything a plugin needs from the core, in one import:
 * `import { definePlugin, defineOperation } from 'rpc-service/plugin'`.
 */
export { definePlugin, type Plugin, type PluginDefinition, type EventSubscriber } from './define.ts';
export { defineOperation, envelope, type Access, type Transport } from '../rpc/operation.ts';
export { defineMigration, type MigrationDef } from '../db/migration.ts';
export { RpcError, notFound, conflict, forbidden, badRequest, type ErrorCode } from '../rpc/errors.ts';
export { recordId, jsonObjectText, email, password } from '../rpc/schemas.ts';
export type { AuthenticatedContext, RequestContext } from '../rpc/context.ts';
export type { Cradle } from '../container.ts';
export type { BusEvent } from '../events/bus.ts';
export type { UploadService, PurposeLimits, FileInfo } from '../uploads/upload-service.ts';
export { fileUrl, fileIdOfUrl } from '../uploads/upload-service.ts';
