import { readFileSync } from 'node:fs';
import path from 'node:path';
import * as v from 'valibot';
import { PACKAGE_ROOT } from '../base/paths.ts';
import { ConfigError } from '../base/settings.ts';

/** The catalogue shipped in config/; AI_CATALOGUE_FILE names one that replaces it. */
export const DEFAULT_CATALOGUE_FILE = path.join(PACKAGE_ROOT, 'config', 'ai-catalogue.json');

/** Every embedding model the service uses writes vectors of this size (the memory and document indexes are built for it). */
export const EMBEDDING_DIMENSIONS = 384;

const name = v.pipe(v.string(), v.minLength(1));
const names = v.array(name);

const ProviderSchema = v.object({
  name,
  /** `local`: computed inside the service; `openai-compatible`: an HTTP API speaking OpenAI's `/v1` routes. */
  type: v.picklist(['local', 'openai-compatible']),
  baseUrl: v.nullable(v.pipe(v.string(), v.url())),
  /** The name of the environment variable that holds the key; never the key. */
  apiKeyEnvVar: v.nullable(v.pipe(v.string(), v.regex(/^[A-Z][A-Z0-9_]*$/, 'apiKeyEnvVar must be the name of an environment variable'))),
});

const price = v.pipe(v.number(), v.minValue(0));

/** What a model's calls cost, in US dollars per million tokens (0 for a model run on the operator's own hardware). */
const CostSchema = v.object({
  input: price,
  /** Input tokens the provider served from its cache, when it charges them less. */
  cachedInput: v.optional(price),
  output: price,
});

const ModelSchema = v.object({
  id: name,
  name,
  provider: name,
  type: name,
  endpoints: names,
  capabilities: names,
  modality: name,
  inputModalities: names,
  outputModalities: names,
  contextWindow: v.pipe(v.number(), v.integer(), v.minValue(1)),
  /** Embedding models: the size of their vectors. */
  dimensions: v.optional(v.pipe(v.number(), v.integer(), v.minValue(1))),
  /**
   * Embedding models: how much their ranking counts in hybrid search against
   * the ranking by words (1), in reciprocal-rank fusion; 1 when not given.
   * Measured on SciFact (docs/decisions/0063-retrieval.md).
   */
  hybridWeight: v.optional(v.pipe(v.number(), v.minValue(0), v.maxValue(1))),
  /** Without it the calls of the model are counted, not priced. */
  costPerMillionTokens: v.optional(CostSchema),
});

const RecommendationSchema = v.object({
  modelId: name,
  reason: name,
  alternatives: v.optional(v.array(v.object({ modelId: name, reason: name }))),
});

const CatalogueSchema = v.object({
  providers: v.array(ProviderSchema),
  models: v.array(ModelSchema),
  defaults: v.record(name, name),
  categories: names,
  recommendations: v.record(name, RecommendationSchema),
});

export type AiProvider = v.InferOutput<typeof ProviderSchema>;
export type AiModel = v.InferOutput<typeof ModelSchema>;
export type AiRecommendation = v.InferOutput<typeof RecommendationSchema>;
export type AiCatalogue = v.InferOutput<typeof CatalogueSchema>;

/** How much the ranking by an embedding model counts in hybrid search (its `hybridWeight`, else 1). */
export const hybridWeightOf = (catalogue: AiCatalogue, modelId: string): number => catalogue.models.find((model) => model.id === modelId)?.hybridWeight ?? 1;

/**
 * What a call of the model cost in US dollars at the catalogue's prices, or
 * null when the model has none. `inputTokens` includes `cachedTokens`, as the
 * AI client counts them (core/ai/ai-client.ts).
 */
export function costOf(model: AiModel, tokens: { inputTokens: number; cachedTokens: number; outputTokens: number }): number | null {
  const cost = model.costPerMillionTokens;
  if (!cost) return null;
  const fresh = tokens.inputTokens - tokens.cachedTokens;
  return (fresh * cost.input + tokens.cachedTokens * (cost.cachedInput ?? cost.input) + tokens.outputTokens * cost.output) / 1_000_000;
}

/** The references inside a catalogue that must hold: providers of models, models of defaults and recommendations, embedding sizes. */
function problemsOf(catalogue: AiCatalogue): string[] {
  const problems: string[] = [];
  const providers = new Set(catalogue.providers.map((provider) => provider.name));
  const models = new Map(catalogue.models.map((model) => [model.id, model]));
  if (providers.size !== catalogue.providers.length) problems.push('provider names must be unique');
  if (models.size !== catalogue.models.length) problems.push('model ids must be unique');
  for (const provider of catalogue.providers) {
    if (provider.type === 'openai-compatible' && !provider.baseUrl) problems.push(`provider ${provider.name} needs a baseUrl`);
  }
  for (const model of catalogue.models) {
    if (!providers.has(model.provider)) problems.push(`model ${model.id} names an unknown provider ${model.provider}`);
    if (model.type === 'embedding' && model.dimensions !== EMBEDDING_DIMENSIONS) {
      problems.push(`embedding model ${model.id} must declare dimensions: ${EMBEDDING_DIMENSIONS}`);
    }
  }
  for (const [category, id] of Object.entries(catalogue.defaults)) {
    if (!models.has(id)) problems.push(`the default ${category} model ${id} is not in models`);
  }
  if (models.get(catalogue.defaults.embedding ?? '')?.type !== 'embedding') problems.push('defaults.embedding must name an embedding model');
  for (const [task, recommendation] of Object.entries(catalogue.recommendations)) {
    for (const { modelId } of [recommendation, ...(recommendation.alternatives ?? [])]) {
      if (!models.has(modelId)) problems.push(`recommendation ${task} names an unknown model ${modelId}`);
    }
  }
  return problems;
}

/** Reads and checks the catalogue; a bad one stops start-up naming AI_CATALOGUE_FILE and each problem. */
export function loadCatalogue(file = DEFAULT_CATALOGUE_FILE): AiCatalogue {
  let json: unknown;
  try {
    json = JSON.parse(readFileSync(file, 'utf8'));
  } catch (error) {
    throw new ConfigError(`AI_CATALOGUE_FILE ${file} cannot be read as JSON: ${(error as Error).message}`);
  }
  const parsed = v.safeParse(CatalogueSchema, json);
  const problems = parsed.success ? problemsOf(parsed.output) : parsed.issues.map((issue) => `${v.getDotPath(issue) ?? '(root)'}: ${issue.message}`);
  if (problems.length > 0) throw new ConfigError(`AI_CATALOGUE_FILE ${file} is not a valid AI catalogue: ${problems.join('; ')}`);
  return parsed.output as AiCatalogue;
}
