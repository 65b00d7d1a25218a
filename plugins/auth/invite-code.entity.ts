import { EntitySchema } from '@mikro-orm/core';
import type { Role } from '../../config/roles.ts';

/** An invitation to join a subscription. Only the code's hash is stored; `hint` helps tell codes apart. */
export interface InviteCode {
  id: string;
  subscriptionId: string;
  codeHash: string;
  hint: string;
  /** The role a user who signs up with the code receives. */
  role: Role;
  maxUses: number;
  uses: number;
  expiresAt: Date | null;
  revokedAt: Date | null;
  createdBy: string;
  createdAt: Date;
}

export const InviteCodeSchema = new EntitySchema<InviteCode>({
  name: 'InviteCode',
  tableName: 'auth_invite_code',
  properties: {
    id: { type: 'uuid', primary: true },
    subscriptionId: { type: 'uuid' },
    codeHash: { type: 'string' },
    hint: { type: 'string' },
    role: { type: 'string' },
    maxUses: { type: 'integer' },
    uses: { type: 'integer', default: 0 },
    expiresAt: { type: 'Date', columnType: 'timestamptz', nullable: true },
    revokedAt: { type: 'Date', columnType: 'timestamptz', nullable: true },
    createdBy: { type: 'uuid' },
    createdAt: { type: 'Date', columnType: 'timestamptz', onCreate: () => new Date() },
  },
});
