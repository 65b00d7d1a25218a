import { asClass } from 'awilix';
import { definePlugin } from 'rpc-service/plugin';
import { knowledgeBaseSettings } from './config.ts';
import { DEPS, type KnowledgeBaseDeps } from './deps.ts';
import { IndexSection } from './section.entity.ts';
import { IndexChunk } from './chunk.entity.ts';
import { IndexCommonWord } from './common-word.entity.ts';
import { IndexSourceStat } from './source-stat.entity.ts';
import { KnowledgeDocument } from './document.entity.ts';
import { DocumentVersion } from './document-version.entity.ts';
import { DocumentsService, FILE_PURPOSE } from './documents.service.ts';
import { Ingestion } from './ingestion.entity.ts';
import { IngestionJobsService } from './ingestion-jobs.service.ts';
import { IngestionService } from './ingestion.service.ts';
import { cleanUp, countWords, embed, ingest, switchModel } from './jobs.ts';
import { KnowledgeIndex } from './knowledge-index.ts';
import { migrations } from './migrations/index.ts';
import {
  cancelJob,
  deleteChunk,
  deleteDocument,
  getChunks,
  getDocument,
  getDocumentVersions,
  getJob,
  getOptions,
  getQuota,
  getStats,
  getUploadKey,
  ingestFiles,
  ingestText,
  ingestUrl,
  listDocuments,
  listJobs,
  reindexDocument,
  retryJob,
  search,
  updateChunk,
  updateDocument,
} from './operations.ts';
import { parsersPoint } from './parsers.ts';
import { documentResources } from './resources.ts';

declare module 'rpc-service/plugin' {
  interface PluginServices {
    /** The search index of texts: prepare (chunk), write, withdraw, remove, embedPending, search. */
    knowledgeIndex: KnowledgeIndex;
  }
  interface PluginErrorCodes {
    /** An ingest past the subscription's document or storage quota. */
    QUOTA_EXCEEDED: 403;
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
  errors: { QUOTA_EXCEEDED: 403 },
  deps: DEPS,
  entities: [IndexSection, IndexChunk, IndexCommonWord, IndexSourceStat, KnowledgeDocument, DocumentVersion, Ingestion],
  extensionPoints: [parsersPoint],
  migrations,
  services: {
    knowledgeIndex: asClass(KnowledgeIndex).singleton(),
    ingestionService: asClass(IngestionService).singleton(),
    ingestionJobsService: asClass(IngestionJobsService).singleton(),
    documentsService: asClass(DocumentsService).singleton(),
  },
  exports: ['knowledgeIndex'],
  extends: { 'core.resources': [documentResources] },
  operations: {
    getUploadKey,
    ingestText,
    ingestFiles,
    ingestUrl,
    listDocuments,
    getDocument,
    updateDocument,
    deleteDocument,
    getDocumentVersions,
    reindexDocument,
    getChunks,
    updateChunk,
    deleteChunk,
    search,
    listJobs,
    getJob,
    retryJob,
    cancelJob,
    getQuota,
    getStats,
    getOptions,
  },
  jobs: { embed, cleanUp, countWords, ingest, switchModel },
  start: async ({ knowledgeIndex, ingestionService, uploadService }) => {
    await knowledgeIndex.embeddings.open();
    uploadService.definePurpose(FILE_PURPOSE, ingestionService.uploadLimits());
  },
});
