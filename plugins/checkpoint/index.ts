import { asClass } from 'awilix';
import { definePlugin } from 'rpc-service/plugin';
import * as v from 'valibot';
import { CheckpointService } from './checkpoint.service.ts';
import { checkpointSettings } from './config.ts';
import { DEPS, type CheckpointDeps } from './deps.ts';
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

/** CheckpointRpc: versioned data scopes of a subscription, each a git repository (files, or records of other plugins as JSON files). */
export const checkpointPlugin = definePlugin<CheckpointDeps>({
  id: 'checkpoint',
  group: 'CheckpointRpc',
  coreVersion: '^2.0.0',
  config: checkpointSettings,
  deps: DEPS,
  services: { checkpointService: asClass(CheckpointService).singleton() },
  extends: {
    'core.events': [
      {
        name: 'dataScopeRefreshed',
        describe: 'A scope you restored or rolled back now holds other files (and records): {scope, hash, action}, hash the checkpoint it is at now.',
        payload: v.strictObject({ scope: v.string(), hash: v.string(), action: v.picklist(['restore', 'rollback']) }),
      },
    ],
    // A subscription's scopes are <root>/<subscriptionId>/<scope>: they move with the tenant.
    'core.tenantData': (deps) => [{ folders: [deps.checkpointService.root] }],
  },
  operations: { listScopes, getStatus, listCheckpoints, createCheckpoint, tagRelease, restore, rollback, writeFile, readFile, listFiles, deleteFile },
});
