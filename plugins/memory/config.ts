import type * as v from 'valibot';
import { env, setting, settings } from 'rpc-service/plugin';

export const memorySettings = settings({
  MEMORY_EXACT_SEARCH_LIMIT: setting(
    env.integer(0, 1_000_000),
    'a recall with at most this many candidate memories compares them all (exact); more use the HNSW index',
    '10000',
  ),
});

export type MemoryConfig = v.InferOutput<typeof memorySettings>;
