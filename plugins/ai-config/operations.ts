import * as v from 'valibot';
import { AI_CONFIGURATION, DEFAULT_MODELS, MODEL_RECORD, PROVIDER_RECORD, RECOMMENDATION_RECORD, RECOMMENDATIONS_BY_TASK } from './ai-config.service.ts';
import { defineOperation } from './deps.ts';

/** More values than any model has; a longer list cannot match anything. */
const MAX_LIST = 100;
/** Longer than any name a catalogue sensibly holds; keeps an error message from echoing a huge value. */
const MAX_TEXT = 500;

const text = (field: string) =>
  v.pipe(
    v.string(`${field} must be a string`),
    v.minLength(1, `${field} must not be empty`),
    v.maxLength(MAX_TEXT, `${field} must be at most ${MAX_TEXT} characters`),
  );

/** An array of non-empty strings; a model must have all of them, so `[]` filters nothing out. */
const list = (field: string) =>
  v.pipe(
    v.array(
      v.pipe(
        v.string(`${field} must hold strings`),
        v.minLength(1, `${field} must not hold empty strings`),
        v.maxLength(MAX_TEXT, `${field} must hold values of at most ${MAX_TEXT} characters`),
      ),
      `${field} must be an array of strings`,
    ),
    v.maxLength(MAX_LIST, `${field} must hold at most ${MAX_LIST} values`),
  );

const MODEL_FILTERS = ['capabilities', 'endpoints', 'provider', 'type', 'modality', 'supportsModalities'];

export const getAIConfiguration = defineOperation({
  access: 'user',
  kind: 'read',
  describe: 'The whole AI catalogue: providers (each with its models), models, default model per category, categories and task recommendations.',
  result: AI_CONFIGURATION,
  params: v.object({}),
  handler: ({ deps }) => deps.aiConfigService.getAIConfiguration(),
});

export const getModels = defineOperation({
  access: 'user',
  kind: 'read',
  describe:
    'Models of the catalogue: provider, type and modality match exactly; a model must have all capabilities and endpoints listed and support all supportsModalities (input or output). An empty array filters nothing.',
  result: v.array(MODEL_RECORD),
  params: v.strictObject(
    {
      capabilities: v.optional(list('capabilities')),
      endpoints: v.optional(list('endpoints')),
      provider: v.optional(text('provider')),
      type: v.optional(text('type')),
      modality: v.optional(text('modality')),
      supportsModalities: v.optional(list('supportsModalities')),
    },
    `unknown param; getModels takes ${MODEL_FILTERS.join(', ')}`,
  ),
  handler: ({ params, deps }) => deps.aiConfigService.getModels(params),
});

export const getProviders = defineOperation({
  access: 'user',
  kind: 'read',
  describe: 'AI providers: name, type, baseUrl, the name of their key variable and whether it is set (never a key).',
  result: v.array(PROVIDER_RECORD),
  params: v.object({}),
  handler: ({ deps }) => deps.aiConfigService.getProviders(),
});

export const getDefaultModels = defineOperation({
  access: 'user',
  kind: 'read',
  describe: 'The default model id of each category (chat, embedding, image_generation, tts, transcription).',
  result: DEFAULT_MODELS,
  params: v.object({}),
  handler: ({ deps }) => deps.aiConfigService.getDefaultModels(),
});

export const getProviderSettings = defineOperation({
  access: 'user',
  kind: 'read',
  describe: 'One provider by providerName (NOT_FOUND when unknown), or without it every provider keyed by name.',
  result: v.union([PROVIDER_RECORD, v.record(v.string(), PROVIDER_RECORD)]),
  params: v.strictObject({ providerName: v.optional(text('providerName')) }, 'unknown param; getProviderSettings takes providerName'),
  handler: ({ params, deps }) => deps.aiConfigService.getProviderSettings(params.providerName),
});

export const getModelCategories = defineOperation({
  access: 'user',
  kind: 'read',
  describe: 'The model categories of the catalogue.',
  result: v.array(v.string()),
  params: v.object({}),
  handler: ({ deps }) => deps.aiConfigService.getModelCategories(),
});

export const getTaskRecommendations = defineOperation({
  access: 'user',
  kind: 'read',
  describe: 'The recommended model (and alternatives) for taskName (NOT_FOUND when unknown), or without it every recommendation keyed by task.',
  result: v.union([RECOMMENDATION_RECORD, RECOMMENDATIONS_BY_TASK]),
  params: v.strictObject({ taskName: v.optional(text('taskName')) }, 'unknown param; getTaskRecommendations takes taskName'),
  handler: ({ params, deps }) => deps.aiConfigService.getTaskRecommendations(params.taskName),
});
