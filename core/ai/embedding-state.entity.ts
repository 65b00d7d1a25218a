import { defineEntity, type InferEntity } from '@mikro-orm/core';

/**
 * For each table of embeddings (keyed by its name): which of its two vector
 * columns answers searches and with which model, and the switch to another
 * model under way, if any. Read and written by EmbeddingColumns, in SQL.
 */
export const EmbeddingState = defineEntity({
  name: 'EmbeddingState',
  tableName: 'core_embedding_state',
  properties: (p) => ({
    tableName: p.text().primary(),
    /** `a` or `b`: the column `embedding_a` or `embedding_b`. */
    activeSlot: p.text().$type<'a' | 'b'>(),
    activeModel: p.text(),
    /** The model the other column is being filled with; null when no switch is under way. */
    nextModel: p.text().nullable(),
    /** The other column may hold vectors of no model in use (an earlier model, an abandoned switch): it is emptied before it is filled. */
    inactiveDirty: p.boolean().default(false),
    /** Until when one node's switch job holds the switch. */
    leaseUntil: p.datetime().nullable(),
    switchStartedAt: p.datetime().nullable(),
    switchedAt: p.datetime().nullable(),
  }),
});
export type EmbeddingState = InferEntity<typeof EmbeddingState>;
