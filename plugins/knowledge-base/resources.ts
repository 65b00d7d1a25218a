import { expandTemplate, type ResourceDeclaration } from 'rpc-service/plugin';

const TEMPLATE = 'kb://documents/{docId}';

/**
 * The knowledge base's documents as MCP resources, each read as the Markdown
 * its latest version was ingested as, through KnowledgeBaseAdminRpc.listDocuments
 * and getDocument. The listing's cursor is the page number.
 */
export const documentResources: ResourceDeclaration = {
  name: 'knowledge-documents',
  title: 'Knowledge-base documents',
  describe: 'The documents of the knowledge base (kb://documents/<docId>), as the Markdown they were read as.',
  template: TEMPLATE,
  mimeType: 'text/markdown',
  operations: ['KnowledgeBaseAdminRpc.getDocument', 'KnowledgeBaseAdminRpc.listDocuments'],
  async list(call, cursor, limit) {
    const page = Number(cursor ?? '1');
    const answer: { data: { _id: string; name: string; description?: string | null; status: string }[]; totalCount: number } = await call(
      'KnowledgeBaseAdminRpc.listDocuments',
      { page, limit },
    );
    return {
      resources: answer.data.map((document) => ({
        uri: expandTemplate(TEMPLATE, { docId: document._id }),
        name: document.name,
        ...(document.description ? { description: document.description } : {}),
      })),
      next: page * limit < answer.totalCount ? String(page + 1) : null,
    };
  },
  async read(call, { docId }) {
    const document: { content: string | null } = await call('KnowledgeBaseAdminRpc.getDocument', { docId });
    return { text: document.content ?? '' };
  },
};
