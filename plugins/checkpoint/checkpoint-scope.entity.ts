import { defineEntity, type InferEntity } from 'rpc-service/plugin';

/**
 * A scope of a subscription that holds a repository: a file scope from its
 * first file on, a scope of records from its first status or checkpoint. Its
 * objects, refs and files are the rows of checkpoint_object, checkpoint_ref
 * and checkpoint_file with the same subscription and scope.
 */
export const CheckpointScope = defineEntity({
  name: 'CheckpointScope',
  tableName: 'checkpoint_scope',
  properties: (p) => ({
    subscriptionId: p.uuid().primary(),
    name: p.string().length(64).primary(),
    createdAt: p.datetime(),
  }),
});
export type CheckpointScope = InferEntity<typeof CheckpointScope>;
