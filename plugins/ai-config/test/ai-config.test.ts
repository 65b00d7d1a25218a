import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import type { Principal } from 'rpc-service/plugin';
import type {
  AIConfigRpcGetAIConfigurationResult,
  AIConfigRpcGetModelsParams,
  AIConfigRpcGetModelsResult,
  AIConfigRpcGetTaskRecommendationsResult,
} from '../../../test/support/caller.ts';
import { refused, type Caller } from '../../../test/support/caller.ts';
import { startTestApp, type TestApp } from '../../../test/support/harness.ts';
import { shippedCatalogue } from '../../../test/support/model-peer.ts';
import { addUser, type Member } from '../../../test/support/users.ts';

const MARKER = 'sk-marker-value';
const SHIPPED: Pick<AIConfigRpcGetAIConfigurationResult, 'models' | 'recommendations'> = shippedCatalogue();

const MODEL_FIELDS = ['id', 'name', 'provider', 'type', 'endpoints', 'capabilities', 'modality', 'inputModalities', 'outputModalities', 'contextWindow'];
const PROVIDER_FIELDS = ['name', 'type', 'baseUrl', 'apiKeyEnvVar', 'configured'];
const OPERATIONS = [
  'getAIConfiguration',
  'getModels',
  'getProviders',
  'getDefaultModels',
  'getProviderSettings',
  'getModelCategories',
  'getTaskRecommendations',
].map((name) => `AIConfigRpc.${name}`);

const ids = (models: { id: string }[]) => models.map((model) => model.id);

/** Params that reach every branch of every operation, found or not, valid or not (called over HTTP: the tests read whole bodies). */
const EVERY_CALL: [string, Record<string, unknown>][] = [
  ['AIConfigRpc.getAIConfiguration', {}],
  ['AIConfigRpc.getModels', {}],
  ['AIConfigRpc.getModels', { provider: 'openai' }],
  ['AIConfigRpc.getModels', { capabilities: ['chat'], supportsModalities: ['text-out'] }],
  ['AIConfigRpc.getModels', { provider: 'nobody' }],
  ['AIConfigRpc.getProviders', {}],
  ['AIConfigRpc.getDefaultModels', {}],
  ['AIConfigRpc.getProviderSettings', {}],
  ['AIConfigRpc.getProviderSettings', { providerName: 'openai' }],
  ['AIConfigRpc.getProviderSettings', { providerName: 'acme' }],
  ['AIConfigRpc.getProviderSettings', { providerName: 'nobody' }],
  ['AIConfigRpc.getModelCategories', {}],
  ['AIConfigRpc.getTaskRecommendations', {}],
  ['AIConfigRpc.getTaskRecommendations', { taskName: 'summarization' }],
  ['AIConfigRpc.getTaskRecommendations', { taskName: 'nobody' }],
];

/** The recommendations keyed by task, as getTaskRecommendations answers them without a taskName. */
type Recommendations = Exclude<AIConfigRpcGetTaskRecommendationsResult, { modelId: string }>;

describe('AIConfigRpc with the shipped catalogue', () => {
  let t: TestApp;
  let member: Member;
  let principal: Principal;
  let ai: Caller['AIConfigRpc'];

  before(async () => {
    // The key of one provider is set, to a value that must never come out.
    t = await startTestApp({ withNotes: false, plugins: ['auth', 'ai-config'], env: { OPENAI_API_KEY: MARKER } });
    const owner = await t.signup();
    member = await addUser(t, owner.subscriptionId, 'user');
    principal = { subscriptionId: owner.subscriptionId, userId: owner.user._id, role: 'user', apiKeyId: null, sessionId: null, initialContext: null };
    ai = t.as(member).AIConfigRpc;
  });
  after(() => t.close());

  const models = (params: AIConfigRpcGetModelsParams) => ai.getModels(params).then(ids);

  const expectedProviders = [
    { name: 'local', type: 'local', baseUrl: null, apiKeyEnvVar: null, configured: true },
    { name: 'openai', type: 'openai-compatible', baseUrl: 'https://api.openai.com/v1', apiKeyEnvVar: 'OPENAI_API_KEY', configured: true },
    { name: 'ollama', type: 'openai-compatible', baseUrl: 'http://127.0.0.1:11434/v1', apiKeyEnvVar: null, configured: true },
  ];
  const defaults = {
    chat: 'gpt-4o-mini',
    embedding: 'local-lexical-384',
    image_generation: 'gpt-image-1',
    tts: 'gpt-4o-mini-tts',
    transcription: 'gpt-4o-mini-transcribe',
  };
  const categories = ['chat', 'embedding', 'image_generation', 'tts', 'transcription', 'code_generation'];
  const allModels = [
    'local-lexical-384',
    'text-embedding-3-small',
    'all-minilm',
    'gpt-4o-mini',
    'gpt-4o',
    'llama3.1',
    'gpt-image-1',
    'gpt-4o-mini-tts',
    'gpt-4o-mini-transcribe',
  ];

  it('getAIConfiguration answers providers with their models, models, defaults, categories and recommendations', async () => {
    const config = await ai.getAIConfiguration();
    assert.deepEqual(Object.keys(config), ['providers', 'models', 'defaults', 'categories', 'recommendations']);

    assert.deepEqual(config.models, SHIPPED.models, 'the models exactly as the catalogue has them');
    assert.deepEqual(ids(config.models), allModels);
    for (const model of config.models) {
      const shipped = SHIPPED.models.find((each) => each.id === model.id)!;
      const expected = [
        ...MODEL_FIELDS,
        ...(model.type === 'embedding' ? ['dimensions'] : []),
        ...(shipped.hybridWeight === undefined ? [] : ['hybridWeight']),
        ...(shipped.costPerMillionTokens === undefined ? [] : ['costPerMillionTokens']),
      ];
      assert.deepEqual(Object.keys(model), expected, model.id);
      if (model.type === 'embedding') assert.equal(model.dimensions, 384);
    }

    assert.deepEqual(
      config.providers.map(({ models: _, ...provider }) => provider),
      expectedProviders,
    );
    const modelsOf = Object.fromEntries(config.providers.map((provider) => [provider.name, ids(provider.models)]));
    assert.deepEqual(modelsOf, {
      local: ['local-lexical-384'],
      openai: ['text-embedding-3-small', 'gpt-4o-mini', 'gpt-4o', 'gpt-image-1', 'gpt-4o-mini-tts', 'gpt-4o-mini-transcribe'],
      ollama: ['all-minilm', 'llama3.1'],
    });
    for (const provider of config.providers) {
      assert.deepEqual(Object.keys(provider), [...PROVIDER_FIELDS, 'models']);
      for (const model of provider.models)
        assert.deepEqual(
          model,
          config.models.find((each) => each.id === model.id),
        );
    }

    assert.deepEqual(config.defaults, defaults);
    assert.deepEqual(config.categories, categories);
    assert.deepEqual(config.recommendations, SHIPPED.recommendations);
    assert.deepEqual(Object.keys(config.recommendations), ['summarization', 'code_generation', 'semantic_memory']);
    assert.deepEqual(config.recommendations.code_generation, {
      modelId: 'gpt-4o',
      reason: 'The strongest code model in the catalogue',
      alternatives: [{ modelId: 'gpt-4o-mini', reason: 'Cheaper for simple edits' }],
    });
  });

  it('getProviders lists name, type, baseUrl, apiKeyEnvVar and configured; a provider without a key variable needs none', async () => {
    assert.deepEqual(await ai.getProviders(), expectedProviders);
  });

  it('getDefaultModels maps each category to a model id; getModelCategories lists the categories', async () => {
    assert.deepEqual(await ai.getDefaultModels(), defaults);
    assert.deepEqual(await ai.getModelCategories(), categories);
  });

  it('getProviderSettings answers one provider by name, or all keyed by name; an unknown name is NOT_FOUND', async () => {
    assert.deepEqual(await ai.getProviderSettings({ providerName: 'openai' }), expectedProviders[1]);
    assert.deepEqual(await ai.getProviderSettings({ providerName: 'local' }), expectedProviders[0]);
    // Without a providerName: every provider, keyed by name.
    const all = (await ai.getProviderSettings()) as Record<string, unknown>;
    assert.deepEqual(Object.keys(all), ['local', 'openai', 'ollama']);
    for (const provider of expectedProviders) assert.deepEqual(all[provider.name], provider);

    for (const providerName of ['anthropic', 'OpenAI', 'openai ', 'constructor', '__proto__', 'toString']) {
      const error = await refused(ai.getProviderSettings({ providerName }), 'NOT_FOUND', providerName);
      assert.match(error.message, /AI provider .* not found/, providerName);
    }
  });

  it('getTaskRecommendations answers one recommendation by task, or all keyed by task; an unknown task is NOT_FOUND', async () => {
    assert.deepEqual(await ai.getTaskRecommendations({ taskName: 'semantic_memory' }), {
      modelId: 'local-lexical-384',
      reason: 'Runs inside the service with no provider; matches words, not meaning',
      alternatives: [
        { modelId: 'text-embedding-3-small', reason: 'Semantic matching, at 384 dimensions to fit the memory index' },
        { modelId: 'all-minilm', reason: 'Semantic matching on your own hardware' },
      ],
    });
    const all = (await ai.getTaskRecommendations()) as Recommendations;
    assert.deepEqual(Object.keys(all), ['summarization', 'code_generation', 'semantic_memory']);
    assert.equal(all.summarization?.modelId, 'gpt-4o-mini');
    assert.deepEqual(all, SHIPPED.recommendations);

    for (const taskName of ['poetry', 'Summarization', 'constructor', '__proto__', 'hasOwnProperty']) {
      const error = await refused(ai.getTaskRecommendations({ taskName }), 'NOT_FOUND', taskName);
      assert.match(error.message, /No recommendation for task/, taskName);
    }
  });

  it('getModels without filters, or with empty arrays, answers every model', async () => {
    assert.deepEqual(await ai.getModels(), SHIPPED.models);
    assert.deepEqual(await models({ capabilities: [], endpoints: [], supportsModalities: [] }), allModels);
  });

  it('getModels filters by each of capabilities (all of them), endpoints (all), provider, type and modality (exact)', async () => {
    assert.deepEqual(await models({ capabilities: ['vision'] }), ['gpt-4o-mini', 'gpt-4o']);
    assert.deepEqual(await models({ capabilities: ['tools'] }), ['gpt-4o-mini', 'gpt-4o', 'llama3.1']);
    assert.deepEqual(await models({ capabilities: ['tools', 'code_generation'] }), ['gpt-4o'], 'a model must have every capability listed');
    assert.deepEqual(await models({ capabilities: ['embedding', 'chat'] }), []);
    assert.deepEqual(await models({ capabilities: ['vision', 'vision'] }), ['gpt-4o-mini', 'gpt-4o'], 'a repeated value changes nothing');

    assert.deepEqual(await models({ endpoints: ['embeddings'] }), ['local-lexical-384', 'text-embedding-3-small', 'all-minilm']);
    assert.deepEqual(await models({ endpoints: ['audio/speech'] }), ['gpt-4o-mini-tts']);
    assert.deepEqual(await models({ endpoints: ['embeddings', 'chat/completions'] }), [], 'a model must have every endpoint listed');

    assert.deepEqual(await models({ provider: 'ollama' }), ['all-minilm', 'llama3.1']);
    assert.deepEqual(await models({ provider: 'local' }), ['local-lexical-384']);

    assert.deepEqual(await models({ type: 'chat' }), ['gpt-4o-mini', 'gpt-4o', 'llama3.1']);
    assert.deepEqual(await models({ type: 'transcription' }), ['gpt-4o-mini-transcribe']);
    assert.deepEqual(await models({ type: 'code_generation' }), [], 'a category no model has as its type is accepted and matches none');

    assert.deepEqual(await models({ modality: 'audio' }), ['gpt-4o-mini-tts', 'gpt-4o-mini-transcribe']);
    assert.deepEqual(await models({ modality: 'multimodal' }), ['gpt-4o-mini', 'gpt-4o', 'gpt-image-1']);
    assert.deepEqual(await models({ modality: 'text' }), ['local-lexical-384', 'text-embedding-3-small', 'all-minilm', 'llama3.1']);
  });

  it('getModels supportsModalities requires every listed modality, among input and output modalities', async () => {
    assert.deepEqual(await models({ supportsModalities: ['image-in'] }), ['gpt-4o-mini', 'gpt-4o', 'gpt-image-1']);
    assert.deepEqual(await models({ supportsModalities: ['image-in', 'text-out'] }), ['gpt-4o-mini', 'gpt-4o'], 'gpt-image-1 has no text-out');
    assert.deepEqual(await models({ supportsModalities: ['image-out'] }), ['gpt-image-1']);
    assert.deepEqual(await models({ supportsModalities: ['text-in', 'audio-out'] }), ['gpt-4o-mini-tts'], 'one input and one output modality');
    assert.deepEqual(await models({ supportsModalities: ['audio-in', 'text-out'] }), ['gpt-4o-mini-transcribe']);
    assert.deepEqual(await models({ supportsModalities: ['text-out'] }), ['gpt-4o-mini', 'gpt-4o', 'llama3.1', 'gpt-4o-mini-transcribe']);
    assert.deepEqual(await models({ supportsModalities: ['audio-in', 'audio-out'] }), []);
    assert.deepEqual(await models({ supportsModalities: ['embedding-out', 'text-in'] }), ['local-lexical-384', 'text-embedding-3-small', 'all-minilm']);
  });

  it('getModels combines filters: a model must pass all of them', async () => {
    assert.deepEqual(await models({ provider: 'openai', type: 'chat', capabilities: ['tools'], supportsModalities: ['image-in'] }), ['gpt-4o-mini', 'gpt-4o']);
    assert.deepEqual(await models({ provider: 'openai', capabilities: ['tools', 'code_generation'], endpoints: ['chat/completions'] }), ['gpt-4o']);
    assert.deepEqual(await models({ endpoints: ['chat/completions'], modality: 'text' }), ['llama3.1']);
    assert.deepEqual(await models({ provider: 'openai', type: 'embedding', modality: 'text', endpoints: ['embeddings'] }), ['text-embedding-3-small']);
    assert.deepEqual(await models({ provider: 'ollama', modality: 'multimodal' }), []);
    assert.deepEqual(await models({ type: 'tts', supportsModalities: ['audio-in'] }), []);
    const [model] = await ai.getModels({ provider: 'openai', type: 'image_generation' });
    assert.deepEqual(
      model,
      SHIPPED.models.find((each) => each.id === 'gpt-image-1'),
    );
  });

  it('bad params are VALIDATION_ERROR naming the field; values the catalogue does not know list the known ones', async () => {
    const cases: [string, unknown, string[]][] = [
      ['getModels', { capabilities: 'vision' }, ['capabilities']],
      ['getModels', { capabilities: ['vision', 7] }, ['capabilities.1']],
      ['getModels', { capabilities: ['teleport'] }, ['capabilities.0']],
      ['getModels', { endpoints: ['embeddings', 'fax'] }, ['endpoints.1']],
      ['getModels', { endpoints: [''] }, ['endpoints.0']],
      ['getModels', { provider: 'anthropic' }, ['provider']],
      ['getModels', { provider: 'OpenAI' }, ['provider']],
      ['getModels', { provider: '' }, ['provider']],
      ['getModels', { provider: 3 }, ['provider']],
      ['getModels', { type: 'video' }, ['type']],
      ['getModels', { type: ['chat'] }, ['type']],
      ['getModels', { modality: 'smell' }, ['modality']],
      ['getModels', { supportsModalities: ['text-in', 'smell-in'] }, ['supportsModalities.1']],
      ['getModels', { supportsModalities: { 0: 'text-in' } }, ['supportsModalities']],
      ['getModels', { supportsModalities: Array.from({ length: 101 }, () => 'text-in') }, ['supportsModalities']],
      ['getModels', { provider: 'nobody', type: 'video', capabilities: ['chat', 'teleport'] }, ['provider', 'type', 'capabilities.1']],
      ['getModels', { capability: ['vision'] }, ['capability']],
      ['getProviderSettings', { providerName: 5 }, ['providerName']],
      ['getProviderSettings', { providerName: '' }, ['providerName']],
      ['getProviderSettings', { providerName: 'x'.repeat(501) }, ['providerName']],
      ['getProviderSettings', { provider: 'openai' }, ['provider']],
      ['getTaskRecommendations', { taskName: ['summarization'] }, ['taskName']],
      ['getTaskRecommendations', { task: 'summarization' }, ['task']],
      ['getTaskRecommendations', { taskName: 'x'.repeat(501) }, ['taskName']],
      ['getModels', { capabilities: ['chat', 'x'.repeat(501)] }, ['capabilities.1']],
    ];
    for (const [operation, params, paths] of cases) {
      const error = await refused(t.as(member).call(`AIConfigRpc.${operation}`, params), 'VALIDATION_ERROR', `${operation} ${JSON.stringify(params)}`);
      assert.deepEqual(
        error.issues?.map((issue) => issue.path),
        paths,
        `${operation} ${JSON.stringify(params)}`,
      );
    }

    const unknown = await refused(ai.getModels({ capabilities: ['chat', 'teleport'] }), 'VALIDATION_ERROR');
    assert.match(unknown.issues![0]!.message, /^capabilities\.1 must be a capability of the catalogue's models: embedding, chat, tools, json, vision/);
    const provider = await refused(ai.getModels({ provider: 'anthropic' }), 'VALIDATION_ERROR');
    assert.equal(provider.issues![0]!.message, 'provider must be a provider of the catalogue: local, openai, ollama');
    const modality = await refused(ai.getModels({ supportsModalities: ['smell-in'] }), 'VALIDATION_ERROR');
    assert.equal(
      modality.issues![0]!.message,
      "supportsModalities.0 must be an input or output modality of the catalogue's models: text-in, embedding-out, image-in, text-out, image-out, audio-out, audio-in",
    );
  });

  it('needs a signed-in caller: every operation is 401 without one, or with a bad token', async () => {
    for (const method of OPERATIONS) {
      await refused(t.as(null).call(method, {}), 'UNAUTHENTICATED', method);
      await refused(t.as({ token: 'not-a-session-token' }).call(method, {}), 'UNAUTHENTICATED', method);
    }
  });

  it('never answers a key: the marker set in OPENAI_API_KEY is in no response, and the provider shows as configured', async () => {
    const bodies: string[] = [];
    for (const [method, params] of EVERY_CALL) bodies.push(JSON.stringify((await t.call(method, params, { token: member.token })).body));
    for (const method of OPERATIONS) bodies.push(JSON.stringify((await t.call(method, {})).body));
    for (const body of bodies) assert.ok(!body.includes(MARKER), body);
    assert.ok(!t.logs.some((line) => line.includes(MARKER)), 'nor in a log line');

    const openai = (await ai.getProviders()).find((provider) => provider.name === 'openai');
    assert.deepEqual(openai, {
      name: 'openai',
      type: 'openai-compatible',
      baseUrl: 'https://api.openai.com/v1',
      apiKeyEnvVar: 'OPENAI_API_KEY',
      configured: true,
    });
    assert.equal((await ai.getProviderSettings({ providerName: 'openai' })).configured, true);
    assert.equal((await ai.getAIConfiguration()).providers[1].configured, true);
  });

  it('answers copies: changing a result changes neither the catalogue nor the next answer', async () => {
    // The core's caller, whose answers are the handlers' own objects (t.as answers a JSON copy, which no change could reach through).
    const caller = t.app.createCaller(principal);
    const first = await caller.call<AIConfigRpcGetAIConfigurationResult>('AIConfigRpc.getAIConfiguration');
    assert.equal(Object.isFrozen(first.models[0]), false);
    first.models[0].capabilities.push('teleport');
    first.models[0].name = 'changed';
    first.providers[0].models[0].endpoints.length = 0;
    first.providers[1].apiKeyEnvVar = 'CHANGED';
    first.defaults.chat = 'changed';
    first.categories.push('changed');
    first.recommendations.summarization!.alternatives!.push({ modelId: 'x', reason: 'y' });
    const models = await caller.call<AIConfigRpcGetModelsResult>('AIConfigRpc.getModels', { provider: 'local' });
    models[0].inputModalities.push('smell-in');
    const recommendation = await caller.call<Exclude<AIConfigRpcGetTaskRecommendationsResult, Recommendations>>('AIConfigRpc.getTaskRecommendations', {
      taskName: 'code_generation',
    });
    recommendation.alternatives![0]!.modelId = 'changed';

    const again = await caller.call<AIConfigRpcGetAIConfigurationResult>('AIConfigRpc.getAIConfiguration');
    assert.deepEqual(again.models, SHIPPED.models);
    assert.deepEqual(again.providers[1].apiKeyEnvVar, 'OPENAI_API_KEY');
    assert.deepEqual(again.defaults, defaults);
    assert.deepEqual(again.categories, categories);
    assert.deepEqual(again.recommendations, SHIPPED.recommendations);
    assert.deepEqual(JSON.parse(JSON.stringify(t.app.deps.aiCatalogue)), SHIPPED);
  });
});

describe('AIConfigRpc with a catalogue from AI_CATALOGUE_FILE', () => {
  let t: TestApp;
  let dir: string;
  let token: string;
  let ai: Caller['AIConfigRpc'];
  const ACME_KEY = 'acme-key-marker-4711';

  const catalogue = {
    providers: [
      { name: 'local', type: 'local', baseUrl: null, apiKeyEnvVar: null },
      { name: 'acme', type: 'openai-compatible', baseUrl: 'https://ai.acme.example/v1', apiKeyEnvVar: 'ACME_AI_KEY' },
      { name: 'globex', type: 'openai-compatible', baseUrl: 'https://llm.globex.example/v1', apiKeyEnvVar: 'GLOBEX_AI_KEY' },
      { name: 'initech', type: 'openai-compatible', baseUrl: 'https://initech.example/v1', apiKeyEnvVar: 'INITECH_AI_KEY' },
    ],
    models: [
      {
        id: 'tiny-embed',
        name: 'Tiny embedder',
        provider: 'local',
        type: 'embedding',
        endpoints: ['embeddings'],
        capabilities: ['embedding'],
        modality: 'text',
        inputModalities: ['text-in'],
        outputModalities: ['embedding-out'],
        contextWindow: 1024,
        dimensions: 384,
      },
      {
        id: 'acme-think',
        name: 'Acme Think',
        provider: 'acme',
        type: 'chat',
        endpoints: ['chat/completions', 'responses'],
        capabilities: ['chat', 'reasoning'],
        modality: 'multimodal',
        inputModalities: ['text-in', 'audio-in'],
        outputModalities: ['text-out'],
        contextWindow: 200000,
      },
      {
        id: 'globex-voice',
        name: 'Globex Voice',
        provider: 'globex',
        type: 'tts',
        endpoints: ['audio/speech'],
        capabilities: ['tts'],
        modality: 'audio',
        inputModalities: ['text-in'],
        outputModalities: ['audio-out'],
        contextWindow: 4096,
      },
    ],
    defaults: { chat: 'acme-think', embedding: 'tiny-embed', tts: 'globex-voice' },
    categories: ['chat', 'embedding', 'tts', 'reasoning'],
    recommendations: {
      triage: { modelId: 'acme-think', reason: 'Reasons over long tickets' },
      narration: { modelId: 'globex-voice', reason: 'Natural voice', alternatives: [{ modelId: 'acme-think', reason: 'Writes the script' }] },
    },
  };

  before(async () => {
    dir = mkdtempSync(path.join(tmpdir(), 'rpc-ai-config-'));
    const file = path.join(dir, 'catalogue.json');
    writeFileSync(file, JSON.stringify(catalogue));
    // ACME's key is set, GLOBEX's is set but empty, INITECH's is not set at all.
    t = await startTestApp({ withNotes: false, plugins: ['auth', 'ai-config'], env: { AI_CATALOGUE_FILE: file, ACME_AI_KEY: ACME_KEY, GLOBEX_AI_KEY: '' } });
    token = (await t.signup()).token;
    ai = t.as({ token }).AIConfigRpc;
  });
  after(async () => {
    await t?.close();
    rmSync(dir, { recursive: true, force: true });
  });

  const providers = [
    { name: 'local', type: 'local', baseUrl: null, apiKeyEnvVar: null, configured: true },
    { name: 'acme', type: 'openai-compatible', baseUrl: 'https://ai.acme.example/v1', apiKeyEnvVar: 'ACME_AI_KEY', configured: true },
    { name: 'globex', type: 'openai-compatible', baseUrl: 'https://llm.globex.example/v1', apiKeyEnvVar: 'GLOBEX_AI_KEY', configured: false },
    { name: 'initech', type: 'openai-compatible', baseUrl: 'https://initech.example/v1', apiKeyEnvVar: 'INITECH_AI_KEY', configured: false },
  ];

  it('every operation answers from that catalogue', async () => {
    const [embed, think, voice] = catalogue.models;
    assert.deepEqual(await ai.getAIConfiguration(), {
      providers: [
        { ...providers[0], models: [embed] },
        { ...providers[1], models: [think] },
        { ...providers[2], models: [voice] },
        { ...providers[3], models: [] },
      ],
      models: catalogue.models,
      defaults: catalogue.defaults,
      categories: catalogue.categories,
      recommendations: catalogue.recommendations,
    });
    assert.deepEqual(await ai.getProviders(), providers);
    assert.deepEqual(await ai.getDefaultModels(), { chat: 'acme-think', embedding: 'tiny-embed', tts: 'globex-voice' });
    assert.deepEqual(await ai.getModelCategories(), ['chat', 'embedding', 'tts', 'reasoning']);
    assert.deepEqual(await ai.getProviderSettings({ providerName: 'globex' }), providers[2]);
    assert.deepEqual(Object.keys(await ai.getProviderSettings()), ['local', 'acme', 'globex', 'initech']);
    assert.deepEqual(await ai.getTaskRecommendations({ taskName: 'triage' }), { modelId: 'acme-think', reason: 'Reasons over long tickets' });
    assert.ok(!('alternatives' in (await ai.getTaskRecommendations({ taskName: 'triage' }))), 'no alternatives invented');
    assert.deepEqual(await ai.getTaskRecommendations(), catalogue.recommendations);
  });

  it('getModels filters on the vocabulary of that catalogue', async () => {
    assert.deepEqual(ids(await ai.getModels({ capabilities: ['reasoning'] })), ['acme-think']);
    assert.deepEqual(ids(await ai.getModels({ endpoints: ['responses', 'chat/completions'] })), ['acme-think']);
    assert.deepEqual(ids(await ai.getModels({ supportsModalities: ['audio-in', 'text-out'] })), ['acme-think']);
    assert.deepEqual(ids(await ai.getModels({ supportsModalities: ['text-in'] })), ['tiny-embed', 'acme-think', 'globex-voice']);
    assert.deepEqual(ids(await ai.getModels({ provider: 'globex', modality: 'audio' })), ['globex-voice']);
    assert.deepEqual(await ai.getModels({ provider: 'initech' }), [], 'a provider without models is known and has none');
    assert.deepEqual(await ai.getModels({ type: 'reasoning' }), [], 'a category is a known type');
  });

  it('names of the shipped catalogue are unknown here', async () => {
    const provider = await refused(ai.getModels({ provider: 'openai' }), 'VALIDATION_ERROR');
    assert.equal(provider.issues![0]!.message, 'provider must be a provider of the catalogue: local, acme, globex, initech');
    await refused(ai.getModels({ capabilities: ['vision'] }), 'VALIDATION_ERROR');
    await refused(ai.getProviderSettings({ providerName: 'openai' }), 'NOT_FOUND');
    await refused(ai.getTaskRecommendations({ taskName: 'summarization' }), 'NOT_FOUND');
  });

  it('no response carries a key value', async () => {
    for (const [method, params] of EVERY_CALL) {
      const body = JSON.stringify((await t.call(method, params, { token })).body);
      assert.ok(!body.includes(ACME_KEY), body);
    }
  });
});
