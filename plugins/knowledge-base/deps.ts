import { jobBuilder, operationBuilder, type Deps } from 'rpc-service/plugin';
import type { KnowledgeBaseConfig } from './config.ts';
import type { DocumentsService } from './documents.service.ts';
import type { IngestionJobsService } from './ingestion-jobs.service.ts';
import type { IngestionService } from './ingestion.service.ts';
import type { KnowledgeIndex } from './knowledge-index.ts';

/**
 * What the knowledge base uses: the database, the AI client and catalogue (embeddings), the worker pool (parsing, chunking),
 * jobs, uploads, the outbound guard (URLs) and the auth plugin's users (a document's userId).
 */
export const DEPS = ['db', 'ai', 'aiCatalogue', 'pool', 'jobs', 'uploadService', 'outbound', 'userService'] as const;

export type KnowledgeBaseDeps = Deps<
  typeof DEPS,
  {
    knowledgeIndex: KnowledgeIndex;
    ingestionService: IngestionService;
    ingestionJobsService: IngestionJobsService;
    documentsService: DocumentsService;
  },
  KnowledgeBaseConfig
>;

export const defineOperation = operationBuilder<KnowledgeBaseDeps>();
export const defineJob = jobBuilder<KnowledgeBaseDeps>();
