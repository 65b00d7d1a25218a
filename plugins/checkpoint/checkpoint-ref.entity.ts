import { defineEntity, type InferEntity } from 'rpc-service/plugin';

/** A ref of a scope's repository: `refs/heads/main` (the checkpoints) and `refs/tags/<name>`. */
export const CheckpointRef = defineEntity({
  name: 'CheckpointRef',
  tableName: 'checkpoint_ref',
  properties: (p) => ({
    subscriptionId: p.uuid().primary(),
    scope: p.string().length(64).primary(),
    name: p.string().length(200).primary(),
    oid: p.string().length(40),
  }),
});
export type CheckpointRef = InferEntity<typeof CheckpointRef>;
