import { asClass } from 'awilix';
import { definePlugin } from 'rpc-service/plugin';
import { knowledgeBaseSettings } from './config.ts';
import { DEPS, type KnowledgeBaseDeps } from './deps.ts';
import { IndexChunk, IndexSection, IndexState } from './index.entity.ts';
import { cleanUp, embed } from './jobs.ts';
import { KnowledgeIndex } from './knowledge-index.ts';
import { migrations } from './migrations/index.ts';

declare module 'rpc-service/plugin' {
  interface PluginServices {
    /** The search index of texts: prepare (chunk), write, withdraw, remove, embedPending, search. */
    knowledgeIndex: KnowledgeIndex;
  }
}

/**
 * KnowledgeBaseAdminRpc, and the search index of texts it shares with other
 * groups (exported as `knowledgeIndex`): Markdown chunked by structure,
 * embedded in the background, searched by meaning or by meaning and words.
 */
export const knowledgeBasePlugin = definePlugin<KnowledgeBaseDeps>({
  id: 'knowledge-base',
  group: 'KnowledgeBaseAdminRpc',
  coreVersion: '^2.0.0',
  config: knowledgeBaseSettings,
  deps: DEPS,
  entities: [IndexSection, IndexChunk, IndexState],
  migrations,
  services: { knowledgeIndex: asClass(KnowledgeIndex).singleton() },
  exports: ['knowledgeIndex'],
  operations: {},
  jobs: { embed, cleanUp },
  start: ({ knowledgeIndex, db }) => knowledgeIndex.open(db.forkEm(null)),
});
