import { asClass } from 'awilix';
import { definePlugin } from 'rpc-service/plugin';
import * as v from 'valibot';
import { CheckpointFile } from './checkpoint-file.entity.ts';
import { CheckpointObject } from './checkpoint-object.entity.ts';
import { CheckpointRef } from './checkpoint-ref.entity.ts';
import { CheckpointScope } from './checkpoint-scope.entity.ts';
import { CheckpointService } from './checkpoint.service.ts';
import { checkpointSettings } from './config.ts';
import { DEPS, type CheckpointDeps } from './deps.ts';
import { exportRoutes } from './export.routes.ts';
import { migrations } from './migrations/index.ts';
import {
  createCheckpoint,
  deleteFile,
  getStatus,
  listCheckpoints,
  listFiles,
  listScopes,
  readFile,
  restore,
  rollback,
  tagRelease,
  writeFile,
} from './operations.ts';
import { scopeFileResources } from './resources.ts';

/** CheckpointRpc: versioned data scopes of a subscription, each a git repository kept in the database (files, or records of other plugins as JSON files). */
export const checkpointPlugin = definePlugin<CheckpointDeps>({
  id: 'checkpoint',
  group: 'CheckpointRpc',
  coreVersion: '^2.0.0',
  config: checkpointSettings,
  deps: DEPS,
  entities: [CheckpointScope, CheckpointObject, CheckpointRef, CheckpointFile],
  migrations,
  routes: exportRoutes,
  services: { checkpointService: asClass(CheckpointService).singleton() },
  extends: {
    'core.events': [
      {
        name: 'dataScopeRefreshed',
        describe: 'A scope you restored or rolled back now holds other files (and records): {scope, hash, action}, hash the checkpoint it is at now.',
        payload: v.strictObject({ scope: v.string(), hash: v.string(), action: v.picklist(['restore', 'rollback']) }),
      },
    ],
    // The scopes' rows move with the tenant as every subscription_id row does; repositories of earlier releases not yet moved into the database move as folders.
    'core.tenantData': (deps) => [{ folders: [deps.checkpointService.diskRoot] }],
    'core.resources': [scopeFileResources],
  },
  operations: { listScopes, getStatus, listCheckpoints, createCheckpoint, tagRelease, restore, rollback, writeFile, readFile, listFiles, deleteFile },
});
