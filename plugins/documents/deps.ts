import { operationBuilder, type Deps } from 'rpc-service/plugin';
import type { PageService } from './page.service.ts';

/** What DocumentRpc uses: the knowledge base's search index (chunks, embeddings, search). */
export const DEPS = ['knowledgeIndex'] as const;

export type DocumentsDeps = Deps<typeof DEPS, { pageService: PageService }>;

export const defineOperation = operationBuilder<DocumentsDeps>();
