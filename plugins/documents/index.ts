import { asClass } from 'awilix';
import { definePlugin } from 'rpc-service/plugin';
import { DEPS, type DocumentsDeps } from './deps.ts';
import { migrations } from './migrations/index.ts';
import { create, getAllDocuments, getById, getByTitle, getVersions, remove, search, update } from './operations.ts';
import { Page } from './page.entity.ts';
import { PageService } from './page.service.ts';
import { PageVersion } from './page-version.entity.ts';
import { pageResources } from './resources.ts';

/** DocumentRpc: trees of Markdown pages per documentation instance, versioned, searched by meaning through the knowledge base's index. */
export const documentsPlugin = definePlugin<DocumentsDeps>({
  id: 'documents',
  group: 'DocumentRpc',
  coreVersion: '^2.0.0',
  deps: DEPS,
  entities: [Page, PageVersion],
  migrations,
  services: { pageService: asClass(PageService).singleton() },
  extends: {
    'core.tools': [
      { name: 'documents.search', describe: 'Find the passages of a documentation instance that answer a question.', method: 'DocumentRpc.search' },
    ],
    'core.resources': [pageResources],
  },
  operations: { getAllDocuments, getById, getByTitle, create, update, delete: remove, getVersions, search },
});
