import { defineEntity, type InferEntity } from 'rpc-service/plugin';

/** A one-time recovery code of a user: only its SHA-256 is kept; shown once when made. */
export const RecoveryCode = defineEntity({
  name: 'RecoveryCode',
  tableName: 'account_security_recovery_code',
  properties: (p) => ({
    subscriptionId: p.uuid().primary(),
    id: p.uuid().primary(),
    userId: p.uuid().index(),
    codeHash: p.text(),
    createdAt: p.datetime(),
    usedAt: p.datetime().nullable(),
  }),
});
export type RecoveryCode = InferEntity<typeof RecoveryCode>;
