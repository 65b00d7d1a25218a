import { expandTemplate, type ResourceDeclaration } from 'rpc-service/plugin';
import type { MemoryRecord } from './memory.service.ts';

const TEMPLATE = 'memory://{scope}/{memoryId}';

/** A memory's first words, as a listing names it. */
const nameOf = (content: string) => (content.length > 80 ? `${content.slice(0, 79)}…` : content);

/**
 * The caller's memories (`user`), then the subscription's (`global`), as MCP
 * resources, through MemoryRpc.listMemories and getMemory. The listing's
 * cursor is the scope and the operation's own cursor.
 */
export const memoryResources: ResourceDeclaration = {
  name: 'memories',
  title: 'Memories',
  describe: "Your memories (memory://user/<id>) and your subscription's (memory://global/<id>), as text.",
  template: TEMPLATE,
  mimeType: 'text/plain',
  operations: ['MemoryRpc.getMemory', 'MemoryRpc.listMemories'],
  async list(call, cursor, limit) {
    const [scope, offset] = cursor ? [cursor.slice(0, cursor.indexOf(':')), cursor.slice(cursor.indexOf(':') + 1)] : ['user', ''];
    const page: { memories: MemoryRecord[]; next_page_offset: string | null } = await call('MemoryRpc.listMemories', {
      scope,
      limit,
      ...(offset ? { offset } : {}),
    });
    const next = page.next_page_offset !== null ? `${scope}:${page.next_page_offset}` : scope === 'user' ? 'global:' : null;
    return {
      resources: page.memories.map((memory) => ({ uri: expandTemplate(TEMPLATE, { scope, memoryId: memory.id }), name: nameOf(memory.content) })),
      next,
    };
  },
  async read(call, { scope, memoryId }) {
    const memory: MemoryRecord = await call('MemoryRpc.getMemory', { scope, memoryId });
    return { text: memory.content };
  },
};
