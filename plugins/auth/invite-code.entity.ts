import { defineEntity, type InferEntity, type Role } from 'rpc-service/plugin';

/** An invitation to join a subscription. Only the code's hash is stored; `hint` helps tell codes apart. */
export const InviteCode = defineEntity({
  name: 'InviteCode',
  tableName: 'auth_invite_code',
  properties: (p) => ({
    subscriptionId: p.uuid().primary(),
    id: p.uuid().primary(),
    codeHash: p.text().unique(),
    hint: p.text(),
    /** The role a user who signs up with the code receives. */
    role: p.text().$type<Role>(),
    maxUses: p.integer(),
    uses: p.integer().default(0),
    expiresAt: p.datetime().nullable(),
    revokedAt: p.datetime().nullable(),
    createdBy: p.uuid(),
    createdAt: p.datetime(),
  }),
  indexes: [{ properties: ['subscriptionId', 'createdAt'] }],
});
export type InviteCode = InferEntity<typeof InviteCode>;
