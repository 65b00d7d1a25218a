import { asClass } from 'awilix';
import { definePlugin, switchModelJob } from 'rpc-service/plugin';
import { memorySettings } from './config.ts';
import { DEPS, type MemoryDeps } from './deps.ts';
import { Memory } from './memory.entity.ts';
import { MemoryService } from './memory.service.ts';
import { migrations } from './migrations/index.ts';
import { deleteMemory, getMemory, listMemories, recallMemories, saveMemory } from './operations.ts';
import { memoryResources } from './resources.ts';

/** MemoryRpc: semantic memories per user or per subscription, recalled through pgvector. */
export const memoryPlugin = definePlugin<MemoryDeps>({
  id: 'memory',
  group: 'MemoryRpc',
  coreVersion: '^2.0.0',
  config: memorySettings,
  deps: DEPS,
  entities: [Memory],
  migrations,
  services: { memoryService: asClass(MemoryService).singleton() },
  extends: {
    'core.tools': [
      { name: 'memory.save', describe: 'Remember a fact (for the user, or for everyone with scope global).', method: 'MemoryRpc.saveMemory' },
      { name: 'memory.recall', describe: 'Recall the memories closest to a question.', method: 'MemoryRpc.recallMemories' },
    ],
    'core.resources': [memoryResources],
  },
  operations: { saveMemory, recallMemories, deleteMemory, getMemory, listMemories },
  jobs: { switchModel: switchModelJob<MemoryDeps>((deps) => deps.memoryService.embeddings, 'the memories') },
  start: async ({ memoryService }) => {
    await memoryService.embeddings.open();
  },
});
