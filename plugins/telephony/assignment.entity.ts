import { defineEntity, type InferEntity } from 'rpc-service/plugin';

export const ASSIGNEE_KINDS = ['user', 'agent'] as const;
export type AssigneeKind = (typeof ASSIGNEE_KINDS)[number];

/**
 * An extension of the local provider's pool assigned to a user or an agent
 * of a subscription. Each subscription numbers its own extensions, so the
 * same extension may be assigned once in every subscription: the unique
 * (subscription, extension) is what makes a second assignment a CONFLICT,
 * concurrent ones included.
 */
export const TelephonyAssignment = defineEntity({
  name: 'TelephonyAssignment',
  tableName: 'telephony_assignment',
  properties: (p) => ({
    subscriptionId: p.uuid().primary(),
    id: p.uuid().primary(),
    extension: p.text(),
    kind: p.enum([...ASSIGNEE_KINDS]),
    /** The user's id, for kind user. */
    userId: p.uuid().nullable(),
    /** The agent's identifier on the platform, for kind agent. */
    agentConfigId: p.text().nullable(),
    /** The agent's contact id when the assignment named one. */
    agentContactId: p.text().nullable(),
    assignedBy: p.uuid(),
    createdAt: p.datetime(),
  }),
  uniques: [{ properties: ['subscriptionId', 'extension'] }],
  indexes: [
    { properties: ['subscriptionId', 'userId'] },
    { properties: ['subscriptionId', 'agentConfigId'] },
    { properties: ['subscriptionId', 'agentContactId'] },
  ],
});
export type TelephonyAssignment = InferEntity<typeof TelephonyAssignment>;
