import type * as v from 'valibot';
import { env, setting, settings } from 'rpc-service/plugin';

export const knowledgeBaseSettings = settings({
  KB_CHUNK_SIZE: setting(env.integer(200, 8000), 'characters a chunk (the unit matched against a question) holds at most', '1000'),
  KB_CHUNK_OVERLAP: setting(env.integer(0, 2000), "characters of a chunk's end repeated at the start of the next", '150'),
  KB_SECTION_SIZE: setting(env.integer(500, 32000), 'characters a section (the context returned with a hit) holds at most', '4000'),
  KB_MAX_FILE_BYTES: setting(env.integer(1024, 1024 * 1024 * 1024), 'largest file the knowledge base ingests, in bytes (UPLOAD_MAX_BYTES caps it)', '20971520'),
  KB_FETCH_TIMEOUT_MS: setting(env.integer(1000, 600_000), 'how long ingesting a URL waits for the page or file, in milliseconds', '30000'),
  KB_MAX_DOCUMENTS: setting(env.integer(1, 100_000_000), 'documents (not deleted) a subscription may hold', '10000'),
  KB_MAX_STORAGE_BYTES: setting(
    env.integer(1024, Number.MAX_SAFE_INTEGER),
    'bytes of ingested text and files (latest versions, not deleted) a subscription may hold',
    '1073741824',
  ),
  KB_EXACT_SEARCH_LIMIT: setting(
    env.integer(0, 1_000_000),
    'a search with at most this many candidate chunks compares them all (exact); more use the HNSW index',
    '10000',
  ),
});

export type KnowledgeBaseConfig = v.InferOutput<typeof knowledgeBaseSettings>;
