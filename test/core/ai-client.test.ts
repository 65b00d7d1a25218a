import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { definePlugin, type AiCall, type RequestContext } from 'rpc-service/plugin';
import { DEFAULT_CATALOGUE_FILE } from '../../core/ai/catalogue.ts';
import { startTestApp, type TestApp } from '../support/harness.ts';
import { startHttpReceiver, type ReceivedRequest, type Reply } from '../support/peers.ts';

const cosine = (a: number[], b: number[]) => a.reduce((sum, value, index) => sum + value * b[index]!, 0);
/** The subscription the calls are made for, unless a test says otherwise. */
const TENANT = '5d1c7a0e-2b4f-4c8d-9e6a-7f3b2c1d0e9a';
const ctxOf = (t: TestApp, subscriptionId: string | null = TENANT): RequestContext =>
  ({
    requestId: 'test',
    subscriptionId,
    userId: null,
    role: null,
    apiKeyId: null,
    sessionId: null,
    projectId: null,
    serviceCode: null,
    extra: {},
    em: t.app.deps.db.forkEm(subscriptionId),
    log: t.app.logger,
  }) as unknown as RequestContext;
const caller = { type: 'test', name: 'ai-client.test' };

// The traces are those the ai-telemetry plugin records through `core.aiCalls`.
async function traceOf(t: TestApp, traceId: string) {
  const [row] = await t.app.deps.db.execute<Record<string, unknown>>('select * from ai_telemetry_trace where trace_id = ?', [traceId]);
  return row;
}

describe('AI client: the local embedder', () => {
  let t: TestApp;
  before(async () => (t = await startTestApp({ withNotes: false, plugins: ['auth', 'ai-telemetry'] })));
  after(() => t.close());

  it('embeds texts into normalised 384-dimension vectors, lexically close texts closest, in the worker pool, traced', async () => {
    const texts = ['Red apple pie with cinnamon', 'a recipe for apple pie', 'quantum field theory lectures', '!!!'];
    const { vectors, model, traceId } = await t.app.deps.ai.embed(ctxOf(t), texts, { caller });
    assert.equal(model, 'local-lexical-384');
    assert.equal(vectors.length, 4);
    for (const vector of vectors) {
      assert.equal(vector.length, 384);
      assert.ok(Math.abs(cosine(vector, vector) - 1) < 1e-6, 'unit length');
    }
    assert.ok(cosine(vectors[0]!, vectors[1]!) > 0.3);
    assert.ok(cosine(vectors[0]!, vectors[1]!) > cosine(vectors[0]!, vectors[2]!) + 0.2);
    const again = await t.app.deps.ai.embed(ctxOf(t), [texts[0]!], { caller });
    assert.deepEqual(again.vectors[0], vectors[0], 'deterministic');

    const trace = await traceOf(t, traceId);
    assert.equal(trace.status, 'success');
    assert.equal(trace.provider, 'local');
    assert.equal(trace.operation, 'embedding');
    assert.equal(trace.caller_type, 'test');
    assert.equal(trace.caller_name, 'ai-client.test');
    assert.equal(trace.input_tokens, 15, 'the words read');
    assert.equal(trace.total_tokens, 15);
    assert.equal(trace.cached_tokens, 0);
    assert.equal(trace.subscription_id, TENANT);

    // A call made for no subscription is answered but kept by no tenant.
    const untenanted = await t.app.deps.ai.embed(ctxOf(t, null), [texts[0]!], { caller });
    assert.deepEqual(untenanted.vectors[0], vectors[0]);
    assert.equal(await traceOf(t, untenanted.traceId), undefined);
  });

  it('spreads a large batch over the pool and keeps the order', async () => {
    const texts = Array.from({ length: 200 }, (_, index) => `memory number ${index} about topic ${index % 7}`);
    const { vectors } = await t.app.deps.ai.embed(ctxOf(t), texts, { caller });
    const single = await t.app.deps.ai.embed(ctxOf(t), [texts[137]!], { caller });
    assert.deepEqual(vectors[137], single.vectors[0]);
  });
});

describe('AI client: an OpenAI-compatible provider', () => {
  let t: TestApp;
  let dir: string;
  let server: Awaited<ReturnType<typeof startHttpReceiver>>;
  let reply: (request: ReceivedRequest, index: number) => Reply = () => ({ status: 500 });

  const vector = (seed: number) => Array.from({ length: 384 }, (_, index) => (index === seed ? 1 : 0));
  const writeCatalogue = (baseUrl: string) => {
    const catalogue = JSON.parse(readFileSync(DEFAULT_CATALOGUE_FILE, 'utf8'));
    catalogue.providers.push({ name: 'loopback', type: 'openai-compatible', baseUrl, apiKeyEnvVar: 'LOOPBACK_AI_KEY' });
    catalogue.models.push(
      { ...catalogue.models.find((model: { id: string }) => model.id === 'text-embedding-3-small'), id: 'loop-embed', provider: 'loopback' },
      { ...catalogue.models.find((model: { id: string }) => model.id === 'gpt-4o-mini'), id: 'loop-chat', provider: 'loopback' },
    );
    const file = path.join(dir, `catalogue-${Math.random()}.json`);
    writeFileSync(file, JSON.stringify(catalogue));
    return file;
  };

  before(async () => {
    server = await startHttpReceiver((request, index) => reply(request, index));
    dir = mkdtempSync(path.join(tmpdir(), 'rpc-ai-'));
    t = await startTestApp({
      withNotes: false,
      plugins: ['auth', 'ai-telemetry'],
      env: {
        AI_CATALOGUE_FILE: writeCatalogue(`${server.url}/v1`),
        LOOPBACK_AI_KEY: 'sk-loopback-secret',
        OUTBOUND_ALLOW_PRIVATE: 'true',
        AI_MAX_RETRIES: '2',
      },
    });
  });
  after(async () => {
    await t.close();
    await server.close();
    rmSync(dir, { recursive: true, force: true });
  });

  it('posts /v1/embeddings with the key of the named variable, retries 429 and 5xx, and traces the tokens returned', async () => {
    const first = server.requests.length;
    reply = (_request, index) =>
      index === first
        ? { status: 429, headers: { 'retry-after': '1' } }
        : index === first + 1
          ? { status: 502 }
          : {
              status: 200,
              json: {
                object: 'list',
                data: [
                  { index: 1, embedding: vector(1) },
                  { index: 0, embedding: vector(0) },
                ],
                usage: { prompt_tokens: 12, total_tokens: 12, prompt_tokens_details: { cached_tokens: 4 } },
              },
            };
    const subscriptionId = '0b7e8a52-3c1d-4e6f-9a0b-1c2d3e4f5a6b';
    const { vectors, traceId } = await t.app.deps.ai.embed(ctxOf(t, subscriptionId), ['first text', 'second text'], {
      model: 'loop-embed',
      caller,
      threadId: 'thread-1',
    });
    assert.deepEqual(vectors, [vector(0), vector(1)], 'in input order, whatever order the answer lists them');
    const requests = server.requests.slice(first);
    assert.equal(requests.length, 3);
    assert.ok(requests[1]!.at - requests[0]!.at >= 950, 'Retry-After was waited for');
    for (const request of requests) {
      assert.equal(request.path, '/v1/embeddings');
      assert.equal(request.headers.authorization, 'Bearer sk-loopback-secret');
      assert.deepEqual(JSON.parse(request.body), { model: 'loop-embed', input: ['first text', 'second text'], dimensions: 384 });
    }
    const trace = await traceOf(t, traceId);
    assert.equal(trace.status, 'success');
    assert.equal(trace.subscription_id, subscriptionId);
    assert.equal(trace.thread_id, 'thread-1');
    assert.equal(trace.provider, 'loopback');
    assert.equal(trace.attempts, 3);
    assert.deepEqual(
      [trace.input_tokens, trace.output_tokens, trace.cached_tokens, trace.total_tokens],
      [12, 0, 4, 12],
      'cached tokens are part of input, not added',
    );
  });

  it('completes a chat and traces input, output and cached tokens apart', async () => {
    const first = server.requests.length;
    reply = () => ({
      status: 200,
      json: {
        choices: [{ message: { role: 'assistant', content: 'Hello there' } }],
        usage: { prompt_tokens: 30, completion_tokens: 5, prompt_tokens_details: { cached_tokens: 10 } },
      },
    });
    const result = await t.app.deps.ai.chat(ctxOf(t), [{ role: 'user', content: 'Hi' }], { model: 'loop-chat', caller, maxTokens: 50 });
    assert.equal(result.content, 'Hello there');
    assert.deepEqual(result.usage, { inputTokens: 30, outputTokens: 5, cachedTokens: 10 });
    const request = server.requests[first]!;
    assert.equal(request.path, '/v1/chat/completions');
    assert.deepEqual(JSON.parse(request.body), { model: 'loop-chat', messages: [{ role: 'user', content: 'Hi' }], max_tokens: 50 });
    const trace = await traceOf(t, result.traceId);
    assert.deepEqual([trace.operation, trace.input_tokens, trace.output_tokens, trace.cached_tokens, trace.total_tokens], ['chat', 30, 5, 10, 35]);
    // At the catalogue's gpt-4o-mini prices per million: 20 fresh input tokens at 0.15, 10 cached at 0.075, 5 output at 0.6.
    assert.ok(Math.abs(Number(trace.cost_usd) - (20 * 0.15 + 10 * 0.075 + 5 * 0.6) / 1e6) < 1e-12, `cost ${trace.cost_usd}`);
  });

  it('gives up after the retries, or at once on a 4xx, as UPSTREAM_ERROR with an error trace', async () => {
    let first = server.requests.length;
    reply = () => ({ status: 503 });
    await assert.rejects(t.app.deps.ai.embed(ctxOf(t), ['x'], { model: 'loop-embed', caller }), (error: { code: string; message: string }) => {
      assert.equal(error.code, 'UPSTREAM_ERROR');
      assert.match(error.message, /answered 503/);
      return true;
    });
    assert.equal(server.requests.length - first, 3, 'the first attempt and AI_MAX_RETRIES=2 retries');
    first = server.requests.length;
    reply = () => ({ status: 400, json: { error: { message: 'bad input' } } });
    await assert.rejects(t.app.deps.ai.embed(ctxOf(t), ['x'], { model: 'loop-embed', caller }), /answered 400/);
    assert.equal(server.requests.length - first, 1);
    const [trace] = await t.app.deps.db.execute<Record<string, unknown>>(
      `select * from ai_telemetry_trace where status = 'error' order by request_timestamp desc limit 1`,
    );
    assert.equal(trace!.attempts, 1);
    assert.match(String(trace!.error), /answered 400/);
    assert.ok(!JSON.stringify(await t.app.deps.db.execute('select * from ai_telemetry_trace')).includes('sk-loopback-secret'));
    assert.ok(!t.logs.join('\n').includes('sk-loopback-secret'));
  });

  it('is FEATURE_UNAVAILABLE without the key, and refused by the outbound guard without OUTBOUND_ALLOW_PRIVATE', async () => {
    const guarded = await startTestApp({ withNotes: false, plugins: ['auth'], env: { AI_CATALOGUE_FILE: writeCatalogue(`${server.url}/v1`) } });
    try {
      await assert.rejects(guarded.app.deps.ai.embed(ctxOf(guarded), ['x'], { model: 'loop-embed', caller }), (error: { code: string; message: string }) => {
        assert.equal(error.code, 'FEATURE_UNAVAILABLE');
        assert.match(error.message, /set LOOPBACK_AI_KEY/);
        return true;
      });
    } finally {
      await guarded.close();
    }
    const refused = await startTestApp({
      withNotes: false,
      plugins: ['auth'],
      env: { AI_CATALOGUE_FILE: writeCatalogue(`${server.url}/v1`), LOOPBACK_AI_KEY: 'k' },
    });
    const first = server.requests.length;
    try {
      await assert.rejects(refused.app.deps.ai.embed(ctxOf(refused), ['x'], { model: 'loop-embed', caller }), /not a public address/);
      assert.equal(server.requests.length, first);
    } finally {
      await refused.close();
    }
  });
});

describe('AI client: reporting calls through core.aiCalls', () => {
  const reported: AiCall[] = [];
  const recorders = (fail: boolean) =>
    definePlugin({
      id: 'ai-call-probe',
      group: 'AiCallProbeRpc',
      coreVersion: '^2.0.0',
      operations: {},
      extends: {
        'core.aiCalls': [
          {
            record: async (call: AiCall) => {
              if (fail) throw new Error('the recorder is down');
              reported.push(call);
            },
          },
        ],
      },
    });

  it('works with no recorder loaded: nothing records the call', async () => {
    const t = await startTestApp({ withNotes: false, plugins: ['auth'] });
    try {
      const { vectors, traceId } = await t.app.deps.ai.embed(ctxOf(t), ['no telemetry here'], { caller });
      assert.equal(vectors.length, 1);
      assert.match(traceId, /^[0-9a-f-]{36}$/);
    } finally {
      await t.close();
    }
  });

  it('reports each call, failed ones too, with its fields', async () => {
    const t = await startTestApp({ withNotes: false, plugins: ['auth', 'ai-call-probe'], extraPlugins: [recorders(false)] });
    try {
      const { traceId } = await t.app.deps.ai.embed(ctxOf(t), ['one text'], { caller, threadId: 'thread-9' });
      await assert.rejects(t.app.deps.ai.chat(ctxOf(t), [{ role: 'user', content: 'Hi' }], { caller }), /not configured/);
      const [call] = reported.filter((candidate) => candidate.traceId === traceId);
      assert.deepEqual(
        [call!.status, call!.operation, call!.provider, call!.threadId, call!.callerType, call!.callerName, call!.attempts, call!.error],
        ['success', 'embedding', 'local', 'thread-9', 'test', 'ai-client.test', 1, null],
      );
      assert.equal(call!.totalTokens, call!.inputTokens + call!.outputTokens);
      assert.equal(call!.costUsd, 0, 'the local embedder is priced at 0');
      assert.ok(call!.requestTimestamp instanceof Date);
      const failed = reported.find((candidate) => candidate.operation === 'chat');
      assert.deepEqual([failed?.status, failed?.provider], ['error', 'openai']);
      assert.match(String(failed?.error), /not configured/);
    } finally {
      await t.close();
    }
  });

  it('logs a recorder that fails and still answers the call', async () => {
    const t = await startTestApp({ withNotes: false, plugins: ['auth', 'ai-call-probe'], extraPlugins: [recorders(true)] });
    try {
      const { vectors } = await t.app.deps.ai.embed(ctxOf(t), ['still embedded'], { caller });
      assert.equal(vectors.length, 1);
      assert.ok(t.logs.some((line) => line.includes('could not record an AI call') && line.includes('the recorder is down')));
    } finally {
      await t.close();
    }
  });
});
