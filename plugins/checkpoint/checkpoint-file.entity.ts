import { defineEntity, type InferEntity } from 'rpc-service/plugin';

/**
 * A path of a scope: what the last checkpoint holds there (`headOid`) and what
 * the scope holds now (`workOid`), each a blob's id or null. It is git's
 * working tree and index in one: the status is the rows where the two
 * differ, without reading any object. Bytes not yet in a checkpoint wait in
 * `content`; a checkpoint writes them as blobs and clears it.
 */
export const CheckpointFile = defineEntity({
  name: 'CheckpointFile',
  tableName: 'checkpoint_file',
  properties: (p) => ({
    subscriptionId: p.uuid().primary(),
    scope: p.string().length(64).primary(),
    path: p.text().primary(),
    headOid: p.string().length(40).nullable(),
    workOid: p.string().length(40).nullable(),
    /** Bytes of the file as it is now. */
    size: p.integer(),
    content: p.blob().lazy().nullable(),
  }),
});
export type CheckpointFile = InferEntity<typeof CheckpointFile>;
