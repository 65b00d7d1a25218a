import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import type { Principal } from 'rpc-service/plugin';
import { startTestApp, type TestApp } from '../../../test/support/harness.ts';
import { shippedCatalogue } from '../../../test/support/model-peer.ts';
import { addUser } from '../../../test/support/users.ts';

const MARKER = 'sk-marker-value';
const SHIPPED = shippedCatalogue();

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
const as = (token: string) => ({ token });

/** Params that reach every branch of every operation, found or not, valid or not. */
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

async function expectError(t: TestApp, method: string, params: unknown, token: string | undefined, status: number, code: string) {
  const response = await t.call(method, params, token ? as(token) : {});
  assert.equal(response.status, status, `${method} ${JSON.stringify(params)}: ${JSON.stringify(response.body)}`);
  assert.equal(response.body.success, false);
  assert.equal(response.body.data.code, code);
  return response.body.data as { error: string; code: string; issues?: { path: string; message: string }[] };
}

describe('AIConfigRpc with the shipped catalogue', () => {
  let t: TestApp;
  let member: Awaited<ReturnType<typeof addUser>>;
  let principal: Principal;

  before(async () => {
    // The key of one provider is set, to a value that must never come out.
    t = await startTestApp({ withNotes: false, plugins: ['auth', 'ai-config'], env: { OPENAI_API_KEY: MARKER } });
    const owner = await t.signup();
    member = await addUser(t, owner.subscriptionId, 'user');
    principal = { subscriptionId: owner.subscriptionId, userId: owner.user._id, role: 'user', apiKeyId: null, sessionId: null, initialContext: null };
  });
  after(() => t.close());

  const ok = (method: string, params: Record<string, unknown> = {}) => t.ok(`AIConfigRpc.${method}`, params, as(member.token));
  const models = (params: Record<string, unknown>) => ok('getModels', params).then(ids);

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
    const config = await ok('getAIConfiguration');
    assert.deepEqual(Object.keys(config), ['providers', 'models', 'defaults', 'categories', 'recommendations']);

    assert.deepEqual(config.models, SHIPPED.models, 'the models exactly as the catalogue has them');
    assert.deepEqual(ids(config.models), allModels);
    for (const model of config.models) {
      const priced = SHIPPED.models.find((each: { id: string }) => each.id === model.id).costPerMillionTokens !== undefined;
      const expected = [...MODEL_FIELDS, ...(model.type === 'embedding' ? ['dimensions'] : []), ...(priced ? ['costPerMillionTokens'] : [])];
      assert.deepEqual(Object.keys(model), expected, model.id);
      if (model.type === 'embedding') assert.equal(model.dimensions, 384);
    }

    assert.deepEqual(
      config.providers.map(({ models: _, ...provider }: { models: unknown }) => provider),
      expectedProviders,
    );
    const modelsOf = Object.fromEntries(config.providers.map((provider: { name: string; models: { id: string }[] }) => [provider.name, ids(provider.models)]));
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
          config.models.find((each: { id: string }) => each.id === model.id),
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
    assert.deepEqual(await ok('getProviders'), expectedProviders);
  });

  it('getDefaultModels maps each category to a model id; getModelCategories lists the categories', async () => {
    assert.deepEqual(await ok('getDefaultModels'), defaults);
    assert.deepEqual(await ok('getModelCategories'), categories);
  });

  it('getProviderSettings answers one provider by name, or all keyed by name; an unknown name is NOT_FOUND', async () => {
    assert.deepEqual(await ok('getProviderSettings', { providerName: 'openai' }), expectedProviders[1]);
    assert.deepEqual(await ok('getProviderSettings', { providerName: 'local' }), expectedProviders[0]);
    const all = await ok('getProviderSettings');
    assert.deepEqual(Object.keys(all), ['local', 'openai', 'ollama']);
    for (const provider of expectedProviders) assert.deepEqual(all[provider.name], provider);

    for (const providerName of ['anthropic', 'OpenAI', 'openai ', 'constructor', '__proto__', 'toString']) {
      const error = await expectError(t, 'AIConfigRpc.getProviderSettings', { providerName }, member.token, 404, 'NOT_FOUND');
      assert.match(error.error, /AI provider .* not found/, providerName);
    }
  });

  it('getTaskRecommendations answers one recommendation by task, or all keyed by task; an unknown task is NOT_FOUND', async () => {
    assert.deepEqual(await ok('getTaskRecommendations', { taskName: 'semantic_memory' }), {
      modelId: 'local-lexical-384',
      reason: 'Runs inside the service with no provider; matches words, not meaning',
      alternatives: [
        { modelId: 'text-embedding-3-small', reason: 'Semantic matching, at 384 dimensions to fit the memory index' },
        { modelId: 'all-minilm', reason: 'Semantic matching on your own hardware' },
      ],
    });
    const all = await ok('getTaskRecommendations');
    assert.deepEqual(Object.keys(all), ['summarization', 'code_generation', 'semantic_memory']);
    assert.equal(all.summarization.modelId, 'gpt-4o-mini');
    assert.deepEqual(all, SHIPPED.recommendations);

    for (const taskName of ['poetry', 'Summarization', 'constructor', '__proto__', 'hasOwnProperty']) {
      const error = await expectError(t, 'AIConfigRpc.getTaskRecommendations', { taskName }, member.token, 404, 'NOT_FOUND');
      assert.match(error.error, /No recommendation for task/, taskName);
    }
  });

  it('getModels without filters, or with empty arrays, answers every model', async () => {
    assert.deepEqual(await ok('getModels'), SHIPPED.models);
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
    const [model] = await ok('getModels', { provider: 'openai', type: 'image_generation' });
    assert.deepEqual(
      model,
      SHIPPED.models.find((each: { id: string }) => each.id === 'gpt-image-1'),
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
      const error = await expectError(t, `AIConfigRpc.${operation}`, params, member.token, 400, 'VALIDATION_ERROR');
      assert.deepEqual(
        error.issues!.map((issue) => issue.path),
        paths,
        `${operation} ${JSON.stringify(params)}`,
      );
    }

    const unknown = await expectError(t, 'AIConfigRpc.getModels', { capabilities: ['chat', 'teleport'] }, member.token, 400, 'VALIDATION_ERROR');
    assert.match(unknown.issues![0]!.message, /^capabilities\.1 must be a capability of the catalogue's models: embedding, chat, tools, json, vision/);
    const provider = await expectError(t, 'AIConfigRpc.getModels', { provider: 'anthropic' }, member.token, 400, 'VALIDATION_ERROR');
    assert.equal(provider.issues![0]!.message, 'provider must be a provider of the catalogue: local, openai, ollama');
    const modality = await expectError(t, 'AIConfigRpc.getModels', { supportsModalities: ['smell-in'] }, member.token, 400, 'VALIDATION_ERROR');
    assert.equal(
      modality.issues![0]!.message,
      "supportsModalities.0 must be an input or output modality of the catalogue's models: text-in, embedding-out, image-in, text-out, image-out, audio-out, audio-in",
    );
  });

  it('needs a signed-in caller: every operation is 401 without one, or with a bad token', async () => {
    for (const method of OPERATIONS) {
      await expectError(t, method, {}, undefined, 401, 'UNAUTHENTICATED');
      await expectError(t, method, {}, 'not-a-session-token', 401, 'UNAUTHENTICATED');
    }
  });

  it('never answers a key: the marker set in OPENAI_API_KEY is in no response, and the provider shows as configured', async () => {
    const bodies: string[] = [];
    for (const [method, params] of EVERY_CALL) bodies.push(JSON.stringify((await t.call(method, params, as(member.token))).body));
    for (const method of OPERATIONS) bodies.push(JSON.stringify((await t.call(method, {})).body));
    for (const body of bodies) assert.ok(!body.includes(MARKER), body);
    assert.ok(!t.logs.some((line) => line.includes(MARKER)), 'nor in a log line');

    const openai = (await ok('getProviders')).find((provider: { name: string }) => provider.name === 'openai');
    assert.deepEqual(openai, {
      name: 'openai',
      type: 'openai-compatible',
      baseUrl: 'https://api.openai.com/v1',
      apiKeyEnvVar: 'OPENAI_API_KEY',
      configured: true,
    });
    assert.equal((await ok('getProviderSettings', { providerName: 'openai' })).configured, true);
    assert.equal((await ok('getAIConfiguration')).providers[1].configured, true);
  });

  it('answers copies: changing a result changes neither the catalogue nor the next answer', async () => {
    const caller = t.app.createCaller(principal);
    const first = await caller.call<any>('AIConfigRpc.getAIConfiguration');
    assert.equal(Object.isFrozen(first.models[0]), false);
    first.models[0].capabilities.push('teleport');
    first.models[0].name = 'changed';
    first.providers[0].models[0].endpoints.length = 0;
    first.providers[1].apiKeyEnvVar = 'CHANGED';
    first.defaults.chat = 'changed';
    first.categories.push('changed');
    first.recommendations.summarization.alternatives.push({ modelId: 'x', reason: 'y' });
    const models = await caller.call<any>('AIConfigRpc.getModels', { provider: 'local' });
    models[0].inputModalities.push('smell-in');
    const recommendation = await caller.call<any>('AIConfigRpc.getTaskRecommendations', { taskName: 'code_generation' });
    recommendation.alternatives[0].modelId = 'changed';

    const again = await caller.call<any>('AIConfigRpc.getAIConfiguration');
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
  });
  after(async () => {
    await t?.close();
    rmSync(dir, { recursive: true, force: true });
  });

  const ok = (method: string, params: Record<string, unknown> = {}) => t.ok(`AIConfigRpc.${method}`, params, as(token));
  const providers = [
    { name: 'local', type: 'local', baseUrl: null, apiKeyEnvVar: null, configured: true },
    { name: 'acme', type: 'openai-compatible', baseUrl: 'https://ai.acme.example/v1', apiKeyEnvVar: 'ACME_AI_KEY', configured: true },
    { name: 'globex', type: 'openai-compatible', baseUrl: 'https://llm.globex.example/v1', apiKeyEnvVar: 'GLOBEX_AI_KEY', configured: false },
    { name: 'initech', type: 'openai-compatible', baseUrl: 'https://initech.example/v1', apiKeyEnvVar: 'INITECH_AI_KEY', configured: false },
  ];

  it('every operation answers from that catalogue', async () => {
    const [embed, think, voice] = catalogue.models;
    assert.deepEqual(await ok('getAIConfiguration'), {
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
    assert.deepEqual(await ok('getProviders'), providers);
    assert.deepEqual(await ok('getDefaultModels'), { chat: 'acme-think', embedding: 'tiny-embed', tts: 'globex-voice' });
    assert.deepEqual(await ok('getModelCategories'), ['chat', 'embedding', 'tts', 'reasoning']);
    assert.deepEqual(await ok('getProviderSettings', { providerName: 'globex' }), providers[2]);
    assert.deepEqual(Object.keys(await ok('getProviderSettings')), ['local', 'acme', 'globex', 'initech']);
    assert.deepEqual(await ok('getTaskRecommendations', { taskName: 'triage' }), { modelId: 'acme-think', reason: 'Reasons over long tickets' });
    assert.ok(!('alternatives' in (await ok('getTaskRecommendations', { taskName: 'triage' }))), 'no alternatives invented');
    assert.deepEqual(await ok('getTaskRecommendations'), catalogue.recommendations);
  });

  it('getModels filters on the vocabulary of that catalogue', async () => {
    assert.deepEqual(ids(await ok('getModels', { capabilities: ['reasoning'] })), ['acme-think']);
    assert.deepEqual(ids(await ok('getModels', { endpoints: ['responses', 'chat/completions'] })), ['acme-think']);
    assert.deepEqual(ids(await ok('getModels', { supportsModalities: ['audio-in', 'text-out'] })), ['acme-think']);
    assert.deepEqual(ids(await ok('getModels', { supportsModalities: ['text-in'] })), ['tiny-embed', 'acme-think', 'globex-voice']);
    assert.deepEqual(ids(await ok('getModels', { provider: 'globex', modality: 'audio' })), ['globex-voice']);
    assert.deepEqual(await ok('getModels', { provider: 'initech' }), [], 'a provider without models is known and has none');
    assert.deepEqual(await ok('getModels', { type: 'reasoning' }), [], 'a category is a known type');
  });

  it('names of the shipped catalogue are unknown here', async () => {
    const provider = await expectError(t, 'AIConfigRpc.getModels', { provider: 'openai' }, token, 400, 'VALIDATION_ERROR');
    assert.equal(provider.issues![0]!.message, 'provider must be a provider of the catalogue: local, acme, globex, initech');
    await expectError(t, 'AIConfigRpc.getModels', { capabilities: ['vision'] }, token, 400, 'VALIDATION_ERROR');
    await expectError(t, 'AIConfigRpc.getProviderSettings', { providerName: 'openai' }, token, 404, 'NOT_FOUND');
    await expectError(t, 'AIConfigRpc.getTaskRecommendations', { taskName: 'summarization' }, token, 404, 'NOT_FOUND');
  });

  it('no response carries a key value', async () => {
    for (const [method, params] of EVERY_CALL) {
      const body = JSON.stringify((await t.call(method, params, as(token))).body);
      assert.ok(!body.includes(ACME_KEY), body);
    }
  });
});
