import { defineEntity, type InferEntity } from 'rpc-service/plugin';
import type { AgentSettings } from './agent-settings.ts';

/**
 * An AI agent's configuration. What lists filter and sort on are columns;
 * the rest of the record's fields (prompt, personality, voice, capabilities,
 * tools ...) are one validated JSON document.
 */
export const Agent = defineEntity({
  name: 'Agent',
  tableName: 'agent_config_agent',
  properties: (p) => ({
    subscriptionId: p.uuid().primary(),
    id: p.uuid().primary(),
    /** Who created it. */
    userId: p.uuid(),
    /** null: global (every project of the subscription). */
    projectId: p.text().nullable(),
    name: p.text(),
    model: p.text(),
    agentClass: p.text(),
    role: p.text().nullable(),
    realtime: p.boolean(),
    avatarUrl: p.text().nullable(),
    messagingContactId: p.text().nullable(),
    settings: p.json<AgentSettings>(),
    createdAt: p.datetime(),
    updatedAt: p.datetime(),
  }),
  uniques: [{ properties: ['subscriptionId', 'name'] }],
  indexes: [{ properties: ['subscriptionId', 'projectId'] }],
});
export type Agent = InferEntity<typeof Agent>;
