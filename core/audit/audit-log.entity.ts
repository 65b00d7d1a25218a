import { defineEntity, type InferEntity } from '@mikro-orm/core';

/** One audited action: who did what to which record, when, and with which credential. */
export const AuditEntry = defineEntity({
  name: 'AuditEntry',
  tableName: 'core_audit_log',
  properties: (p) => ({
    subscriptionId: p.uuid().primary(),
    id: p.uuid().primary(),
    at: p.datetime(),
    /** What kind of record: `secret`, ... */
    kind: p.text(),
    /** The operation group that acted (`SecretsRpc`). */
    group: p.text(),
    /** `read`, `create`, `update`, `delete`, ... */
    action: p.text(),
    targetId: p.text(),
    /** A readable name of the record (`production:STRIPE_KEY`); never a value. */
    target: p.text(),
    userId: p.uuid().nullable(),
    role: p.text().nullable(),
    apiKeyId: p.uuid().nullable(),
    sessionId: p.uuid().nullable(),
    requestId: p.text(),
  }),
  indexes: [{ properties: ['subscriptionId', 'kind', 'at'] }],
});
export type AuditEntry = InferEntity<typeof AuditEntry>;
