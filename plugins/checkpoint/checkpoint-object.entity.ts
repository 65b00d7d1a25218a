import { defineEntity, type InferEntity } from 'rpc-service/plugin';

/**
 * A git object of a scope's repository, as git keeps a loose object: the
 * zlib-deflated `<type> <size>\0<content>`, named by its SHA-1. The export
 * serves these bytes as they are (plugins/checkpoint/export.routes.ts).
 */
export const CheckpointObject = defineEntity({
  name: 'CheckpointObject',
  tableName: 'checkpoint_object',
  properties: (p) => ({
    subscriptionId: p.uuid().primary(),
    scope: p.string().length(64).primary(),
    oid: p.string().length(40).primary(),
    /** The content's length for a blob (listFiles at a checkpoint reads it here); null for trees, commits and tags. */
    size: p.integer().nullable(),
    data: p.blob().lazy(),
  }),
});
export type CheckpointObject = InferEntity<typeof CheckpointObject>;
