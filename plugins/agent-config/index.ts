import { asClass } from 'awilix';
import { definePlugin, entityScope } from 'rpc-service/plugin';
import { Agent } from './agent.entity.ts';
import { AGENT_FIELDS, AVATAR, AVATAR_LIMITS, AgentService } from './agent.service.ts';
import { DEPS, type AgentConfigDeps } from './deps.ts';
import { migrations } from './migrations/index.ts';
import { create, findById, getAvailableTools, getData, getUploadKeyForAvatar, remove, update, updateAvatar } from './operations.ts';

/** AgentConfigRpc: configurations of the subscription's AI agents (model, prompt, personality, voice, capabilities, tools, avatar). */
export const agentConfigPlugin = definePlugin<AgentConfigDeps>({
  id: 'agent-config',
  group: 'AgentConfigRpc',
  coreVersion: '^2.0.0',
  deps: DEPS,
  entities: [Agent],
  migrations,
  services: { agentService: asClass(AgentService).singleton() },
  extends: {
    'core.collections': (deps) => [
      {
        name: 'agentConfigs',
        describe: "The subscription's agent configurations (fields as getData returns them).",
        fields: Object.keys(AGENT_FIELDS),
        list: async (ctx, query) => (await deps.agentService.getData(ctx, { ...query, page: 1, pageSize: query.limit })).data,
      },
    ],
    'core.dataScopes': [entityScope({ name: 'agents', describe: "The subscription's agent configurations, one JSON file each.", entity: Agent })],
  },
  operations: { create, update, findById, getData, delete: remove, getUploadKeyForAvatar, updateAvatar, getAvailableTools },
  start: ({ uploadService }) => uploadService.definePurpose(AVATAR, AVATAR_LIMITS),
});
