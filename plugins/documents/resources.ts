import type { ResourceDeclaration } from 'rpc-service/plugin';

/**
 * A documentation page as an MCP resource (its Markdown), read through
 * DocumentRpc.getById. Pages belong to instances no operation lists, so they
 * are offered as a template only: an agent names a page it found (by
 * DocumentRpc.search or getAllDocuments).
 */
export const pageResources: ResourceDeclaration = {
  name: 'documentation-pages',
  title: 'Documentation pages',
  describe: 'A page of a documentation instance (docs://pages/<docId>), as Markdown.',
  template: 'docs://pages/{docId}',
  mimeType: 'text/markdown',
  operations: ['DocumentRpc.getById'],
  async read(call, { docId }) {
    const page: { title: string; content: string } = await call('DocumentRpc.getById', { docId });
    return { text: page.content };
  },
};
