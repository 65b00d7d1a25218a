import {
  notFound,
  validationError,
  type AiCatalogue,
  type AiClient,
  type AiModel,
  type AiProvider,
  type AiRecommendation,
  type ValidationIssue,
} from 'rpc-service/plugin';
import * as v from 'valibot';

/**
 * A model as `plugins/ai-config/README.md` lists its fields, plus `dimensions`
 * and `hybridWeight` for the models that have them (embedding models) and `costPerMillionTokens`
 * (US dollars) for those the catalogue prices.
 */
export const MODEL_RECORD = v.strictObject({
  id: v.string(),
  name: v.string(),
  provider: v.string(),
  type: v.string(),
  endpoints: v.array(v.string()),
  capabilities: v.array(v.string()),
  modality: v.string(),
  inputModalities: v.array(v.string()),
  outputModalities: v.array(v.string()),
  contextWindow: v.number(),
  dimensions: v.optional(v.number()),
  hybridWeight: v.optional(v.number()),
  costPerMillionTokens: v.optional(v.strictObject({ input: v.number(), cachedInput: v.optional(v.number()), output: v.number() })),
});
export type ModelRecord = v.InferOutput<typeof MODEL_RECORD>;

/** A provider: the name of its key variable and whether that is set, never a key. */
export const PROVIDER_RECORD = v.strictObject({
  name: v.string(),
  type: v.string(),
  baseUrl: v.nullable(v.string()),
  apiKeyEnvVar: v.nullable(v.string()),
  /** True when the provider needs no key (`apiKeyEnvVar` null) or its variable is set to a non-empty value. */
  configured: v.boolean(),
});
export type ProviderRecord = v.InferOutput<typeof PROVIDER_RECORD>;

export const RECOMMENDATION_RECORD = v.strictObject({
  modelId: v.string(),
  reason: v.string(),
  alternatives: v.optional(v.array(v.strictObject({ modelId: v.string(), reason: v.string() }))),
});
export type RecommendationRecord = v.InferOutput<typeof RECOMMENDATION_RECORD>;

/** Default model id by category. */
export const DEFAULT_MODELS = v.record(v.string(), v.string());
export const RECOMMENDATIONS_BY_TASK = v.record(v.string(), RECOMMENDATION_RECORD);

export const AI_CONFIGURATION = v.strictObject({
  providers: v.array(v.strictObject({ ...PROVIDER_RECORD.entries, models: v.array(MODEL_RECORD) })),
  models: v.array(MODEL_RECORD),
  defaults: DEFAULT_MODELS,
  categories: v.array(v.string()),
  recommendations: RECOMMENDATIONS_BY_TASK,
});
export type AiConfiguration = v.InferOutput<typeof AI_CONFIGURATION>;

/** Every field optional; an array asks for all of its values, so an empty one asks for nothing. */
export interface ModelFilter {
  capabilities?: string[];
  endpoints?: string[];
  provider?: string;
  type?: string;
  modality?: string;
  supportsModalities?: string[];
}

type FilterField = keyof ModelFilter;

/** Fresh objects each time: a result never shares an array or object with the catalogue (whose freeze is shallow). */
const modelRecord = (model: AiModel): ModelRecord => ({
  id: model.id,
  name: model.name,
  provider: model.provider,
  type: model.type,
  endpoints: [...model.endpoints],
  capabilities: [...model.capabilities],
  modality: model.modality,
  inputModalities: [...model.inputModalities],
  outputModalities: [...model.outputModalities],
  contextWindow: model.contextWindow,
  ...(model.dimensions === undefined ? {} : { dimensions: model.dimensions }),
  ...(model.hybridWeight === undefined ? {} : { hybridWeight: model.hybridWeight }),
  ...(model.costPerMillionTokens === undefined ? {} : { costPerMillionTokens: { ...model.costPerMillionTokens } }),
});

const recommendationRecord = (recommendation: AiRecommendation): RecommendationRecord => ({
  modelId: recommendation.modelId,
  reason: recommendation.reason,
  ...(recommendation.alternatives === undefined ? {} : { alternatives: recommendation.alternatives.map(({ modelId, reason }) => ({ modelId, reason })) }),
});

const hasAll = (have: readonly string[], wanted: readonly string[] | undefined): boolean =>
  wanted === undefined || wanted.every((value) => have.includes(value));

/**
 * Read-only views of the AI catalogue the core loaded (config/ai-catalogue.json
 * or AI_CATALOGUE_FILE). The catalogue does not change while the service runs,
 * so lookups and the vocabularies of the model filters are built once.
 */
export class AiConfigService {
  readonly #catalogue: Readonly<AiCatalogue>;
  readonly #ai: AiClient;
  readonly #providers: ReadonlyMap<string, AiProvider>;
  readonly #recommendations: ReadonlyMap<string, AiRecommendation>;
  /** The values each filter of getModels accepts, with how the error names them. */
  readonly #vocabularies: Record<FilterField, { values: ReadonlySet<string>; what: string }>;

  constructor({ aiCatalogue, ai }: { aiCatalogue: Readonly<AiCatalogue>; ai: AiClient }) {
    this.#catalogue = aiCatalogue;
    this.#ai = ai;
    this.#providers = new Map(aiCatalogue.providers.map((provider) => [provider.name, provider]));
    this.#recommendations = new Map(Object.entries(aiCatalogue.recommendations));
    const { models } = aiCatalogue;
    this.#vocabularies = {
      provider: { values: new Set(aiCatalogue.providers.map((provider) => provider.name)), what: 'a provider of the catalogue' },
      type: { values: new Set([...models.map((model) => model.type), ...aiCatalogue.categories]), what: 'a model type or category of the catalogue' },
      modality: { values: new Set(models.map((model) => model.modality)), what: "a modality of the catalogue's models" },
      capabilities: { values: new Set(models.flatMap((model) => model.capabilities)), what: "a capability of the catalogue's models" },
      endpoints: { values: new Set(models.flatMap((model) => model.endpoints)), what: "an endpoint of the catalogue's models" },
      supportsModalities: {
        values: new Set(models.flatMap((model) => [...model.inputModalities, ...model.outputModalities])),
        what: "an input or output modality of the catalogue's models",
      },
    };
  }

  getAIConfiguration(): AiConfiguration {
    return {
      providers: this.#catalogue.providers.map((provider) => ({
        ...this.#providerRecord(provider),
        models: this.#catalogue.models.filter((model) => model.provider === provider.name).map(modelRecord),
      })),
      models: this.#catalogue.models.map(modelRecord),
      defaults: this.getDefaultModels(),
      categories: this.getModelCategories(),
      recommendations: this.#allRecommendations(),
    };
  }

  /** The models that pass every filter given; a value the catalogue does not know is a VALIDATION_ERROR naming its field. */
  getModels(filter: ModelFilter): ModelRecord[] {
    this.#checkVocabulary(filter);
    const { capabilities, endpoints, provider, type, modality, supportsModalities } = filter;
    return this.#catalogue.models
      .filter(
        (model) =>
          (provider === undefined || model.provider === provider) &&
          (type === undefined || model.type === type) &&
          (modality === undefined || model.modality === modality) &&
          hasAll(model.capabilities, capabilities) &&
          hasAll(model.endpoints, endpoints) &&
          hasAll([...model.inputModalities, ...model.outputModalities], supportsModalities),
      )
      .map(modelRecord);
  }

  getProviders(): ProviderRecord[] {
    return this.#catalogue.providers.map((provider) => this.#providerRecord(provider));
  }

  getDefaultModels(): Record<string, string> {
    return Object.fromEntries(Object.entries(this.#catalogue.defaults));
  }

  getProviderSettings(providerName?: string): ProviderRecord | Record<string, ProviderRecord> {
    if (providerName === undefined) {
      return Object.fromEntries(this.#catalogue.providers.map((provider) => [provider.name, this.#providerRecord(provider)]));
    }
    const provider = this.#providers.get(providerName);
    if (!provider) throw notFound(`AI provider ${providerName} not found`);
    return this.#providerRecord(provider);
  }

  getModelCategories(): string[] {
    return [...this.#catalogue.categories];
  }

  getTaskRecommendations(taskName?: string): RecommendationRecord | Record<string, RecommendationRecord> {
    if (taskName === undefined) return this.#allRecommendations();
    // A Map, not the catalogue's object: `constructor` or `__proto__` must not find Object.prototype.
    const recommendation = this.#recommendations.get(taskName);
    if (!recommendation) throw notFound(`No recommendation for task ${taskName}`);
    return recommendationRecord(recommendation);
  }

  #allRecommendations(): Record<string, RecommendationRecord> {
    return Object.fromEntries([...this.#recommendations].map(([task, recommendation]) => [task, recommendationRecord(recommendation)]));
  }

  /** The key variable's name and whether it is set; its value is never read here (the settings hold names only). */
  #providerRecord(provider: AiProvider): ProviderRecord {
    return {
      name: provider.name,
      type: provider.type,
      baseUrl: provider.baseUrl,
      apiKeyEnvVar: provider.apiKeyEnvVar,
      configured: this.#ai.isConfigured(provider),
    };
  }

  #checkVocabulary(filter: ModelFilter): void {
    const issues: ValidationIssue[] = [];
    const check = (path: string, field: FilterField, value: string) => {
      const { values, what } = this.#vocabularies[field];
      if (values.has(value)) return;
      const known = values.size > 0 ? [...values].join(', ') : 'the catalogue has none';
      issues.push({ path, message: `${path} must be ${what}: ${known}` });
    };
    for (const field of Object.keys(this.#vocabularies) as FilterField[]) {
      const value = filter[field];
      if (typeof value === 'string') check(field, field, value);
      else value?.forEach((item, index) => check(`${field}.${index}`, field, item));
    }
    if (issues.length > 0) throw validationError(issues);
  }
}
