import * as v from 'valibot';
import { SEARCH_MODES } from 'rpc-service/plugin';
import { defineOperation } from './deps.ts';
import { SCOPES } from './memory.entity.ts';
import { MEMORY_RECORD, RECALLED_MEMORY } from './memory.service.ts';

const MAX_CONTENT_LENGTH = 32_768;
const MAX_TOP_K = 100;
const MAX_LIMIT = 200;
/** Past any real list, and within what SQL's OFFSET takes. */
const MAX_OFFSET = 1_000_000_000;

const whose = {
  scope: v.picklist(SCOPES, `scope must be one of ${SCOPES.join(', ')}`),
  targetUserId: v.optional(v.pipe(v.string('targetUserId must be a string'), v.uuid('targetUserId must be a UUID'))),
};
const count = (label: string, max: number) =>
  v.pipe(
    v.number(`${label} must be a number`),
    v.integer(`${label} must be a whole number`),
    v.minValue(1, `${label} must be at least 1`),
    v.maxValue(max, `${label} must be at most ${max}`),
  );

export const saveMemory = defineOperation({
  access: 'user',
  kind: 'write',
  describe: 'Save a memory (a text and its metadata) for you, another user (agents, admins) or the whole subscription; a given id updates that memory.',
  result: v.strictObject({ success: v.literal(true), memoryId: v.string(), message: v.string() }),
  params: v.object({
    ...whose,
    memory: v.object({
      id: v.optional(v.pipe(v.string('memory.id must be a string'), v.uuid('memory.id must be a UUID'))),
      content: v.pipe(
        v.string('memory.content must be a string'),
        v.check((text) => text.trim().length > 0, 'memory.content must not be empty'),
        v.maxLength(MAX_CONTENT_LENGTH, `memory.content must be at most ${MAX_CONTENT_LENGTH} characters`),
      ),
      metadata: v.optional(v.record(v.string(), v.unknown(), 'memory.metadata must be an object')),
    }),
  }),
  handler: ({ params: { memory, ...whose }, ctx, deps }) => deps.memoryService.saveMemory(ctx, whose, memory),
});

export const recallMemories = defineOperation({
  access: 'user',
  kind: 'write',
  describe:
    'The memories that best answer queryText, best first: by meaning and words together (mode hybrid, the default), by meaning alone (semantic: cosine similarity as score) or by words alone (text: BM25); filter on metadata with the list operators.',
  result: v.strictObject({ success: v.literal(true), memories: v.array(RECALLED_MEMORY) }),
  params: v.object({
    ...whose,
    queryText: v.pipe(
      v.string('queryText must be a string'),
      v.check((text) => text.trim().length > 0, 'queryText must not be empty'),
      v.maxLength(MAX_CONTENT_LENGTH),
    ),
    topK: v.optional(count('topK', MAX_TOP_K), 3),
    filter: v.optional(v.unknown()),
    mode: v.optional(v.picklist(SEARCH_MODES, `mode must be one of ${SEARCH_MODES.join(', ')}`), 'hybrid'),
  }),
  handler: ({ params: { queryText, topK, filter, mode, ...whose }, ctx, deps }) =>
    deps.memoryService.recallMemories(ctx, whose, { queryText, topK, filter, mode }),
});

export const deleteMemory = defineOperation({
  access: 'user',
  kind: 'write',
  describe: 'Delete a memory of the scope.',
  result: v.strictObject({ success: v.literal(true), message: v.string() }),
  params: v.object({ ...whose, memoryId: v.pipe(v.string('memoryId must be a string'), v.uuid('memoryId must be a UUID')) }),
  handler: ({ params: { memoryId, ...whose }, ctx, deps }) => deps.memoryService.deleteMemory(ctx, whose, memoryId),
});

export const getMemory = defineOperation({
  access: 'user',
  kind: 'read',
  describe: 'One memory of the scope by its id (what an agent reads as the MCP resource memory://<scope>/<memoryId>).',
  result: MEMORY_RECORD,
  params: v.object({ ...whose, memoryId: v.pipe(v.string('memoryId must be a string'), v.uuid('memoryId must be a UUID')) }),
  handler: ({ params: { memoryId, ...whose }, ctx, deps }) => deps.memoryService.getMemory(ctx, whose, memoryId),
});

export const listMemories = defineOperation({
  access: 'user',
  kind: 'read',
  describe: 'The memories of the scope, oldest first; offset is a memory id (cursor) or a number of memories to skip.',
  result: v.strictObject({ success: v.literal(true), memories: v.array(MEMORY_RECORD), next_page_offset: v.nullable(v.union([v.string(), v.number()])) }),
  params: v.object({
    ...whose,
    limit: v.optional(count('limit', MAX_LIMIT), 10),
    offset: v.optional(
      v.union(
        [
          v.pipe(v.string(), v.uuid('offset must be a memory id (UUID) or a number')),
          v.pipe(v.number(), v.integer(), v.minValue(0), v.maxValue(MAX_OFFSET, `offset must be at most ${MAX_OFFSET}`)),
        ],
        'offset must be a memory id (UUID) or a whole number of at least 0',
      ),
    ),
  }),
  handler: ({ params: { limit, offset, ...whose }, ctx, deps }) => deps.memoryService.listMemories(ctx, whose, { limit, offset }),
});
