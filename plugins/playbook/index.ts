import { asClass } from 'awilix';
import { definePlugin } from 'rpc-service/plugin';
import { DEPS, type PlaybookDeps } from './deps.ts';
import { migrations } from './migrations/index.ts';
import { create, finalizeResourceUpload, findById, getResourceUploadKey, list, remove, search, update } from './operations.ts';
import { Playbook } from './playbook.entity.ts';
import { PlaybookService, RESOURCE_LIMITS, RESOURCE_PURPOSE } from './playbook.service.ts';

/** PlaybookRpc: the subscription's playbooks (Markdown guides with tags) and their resource files. */
export const playbookPlugin = definePlugin<PlaybookDeps>({
  id: 'playbook',
  group: 'PlaybookRpc',
  coreVersion: '^2.0.0',
  deps: DEPS,
  entities: [Playbook],
  migrations,
  services: { playbookService: asClass(PlaybookService).singleton() },
  operations: { list, search, findById, create, update, delete: remove, getResourceUploadKey, finalizeResourceUpload },
  start: ({ uploadService }) => uploadService.definePurpose(RESOURCE_PURPOSE, RESOURCE_LIMITS),
});
