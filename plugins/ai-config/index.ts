import { asClass } from 'awilix';
import { definePlugin } from 'rpc-service/plugin';
import { AiConfigService } from './ai-config.service.ts';
import { DEPS, type AiConfigDeps } from './deps.ts';
import {
  getAIConfiguration,
  getDefaultModels,
  getModelCategories,
  getModels,
  getProviderSettings,
  getProviders,
  getTaskRecommendations,
} from './operations.ts';

/** AIConfigRpc: read-only views of the AI catalogue (providers, models, defaults, categories, recommendations); never a key. */
export const aiConfigPlugin = definePlugin<AiConfigDeps>({
  id: 'ai-config',
  group: 'AIConfigRpc',
  coreVersion: '^2.0.0',
  deps: DEPS,
  services: { aiConfigService: asClass(AiConfigService).singleton() },
  operations: { getAIConfiguration, getModels, getProviders, getDefaultModels, getProviderSettings, getModelCategories, getTaskRecommendations },
});
