import { randomUUID } from 'node:crypto';
import * as v from 'valibot';
import { OutboundRefusedError, type Outbound } from '../base/outbound.ts';
import type { Logger } from '../base/logger.ts';
import { defineExtensionPoint, type Contribution } from '../base/extension-points.ts';
import type { WorkerPool } from '../pool/worker-pool.ts';
import type { RequestContext } from '../base/context.ts';
import { RpcError } from '../base/errors.ts';
import type { Metrics } from '../base/metrics.ts';
import { inSpan, SpanKind } from '../base/tracing.ts';
import { costOf, EMBEDDING_DIMENSIONS, type AiCatalogue, type AiModel, type AiProvider } from './catalogue.ts';
import embedInThisThread, { vectorsOf, type EmbedResult as EmbedWorkerResult } from '../../workers/embed.ts';

/** Token counts of one call. `inputTokens` includes `cachedTokens` (the cached part of the input); never add the two. */
export interface Usage {
  inputTokens: number;
  outputTokens: number;
  cachedTokens: number;
}

/** Who makes an AI call, as telemetry shows it: `{type: 'plugin', name: 'memory'}`, `{type: 'agent', name: 'support-bot'}`. */
export interface AiCaller {
  type: string;
  name: string;
}

export interface AiCallOptions {
  /** A model id of the catalogue; the category's default when omitted. */
  model?: string;
  caller: AiCaller;
  /** Groups the calls of one conversation in telemetry. */
  threadId?: string | null;
}

export interface ChatMessage {
  role: 'system' | 'user' | 'assistant';
  content: string;
}

export interface ChatOptions extends AiCallOptions {
  temperature?: number;
  maxTokens?: number;
}

export interface ChatResult {
  content: string;
  model: string;
  usage: Usage;
  traceId: string;
}

export interface EmbedResult {
  vectors: number[][];
  model: string;
  traceId: string;
}

/**
 * One call the client made, as it reports it to `core.aiCalls`: who asked
 * (caller type and name, subscription, user), what (provider, model,
 * operation), how it went (status, duration, attempts, error) and the tokens
 * counted. `inputTokens` includes the cached ones; `totalTokens` is input plus
 * output. Prompts and answers are not reported.
 */
export interface AiCall {
  traceId: string;
  subscriptionId: string | null;
  userId: string | null;
  threadId: string | null;
  requestTimestamp: Date;
  durationMs: number;
  status: 'success' | 'error';
  provider: string;
  model: string;
  operation: 'embedding' | 'chat';
  callerType: string;
  callerName: string;
  inputTokens: number;
  outputTokens: number;
  cachedTokens: number;
  totalTokens: number;
  /** In US dollars at the catalogue's prices when the call was made; null when the model has none. */
  costUsd: number | null;
  attempts: number;
  error: string | null;
}

/**
 * A plugin's contribution to `core.aiCalls`: what records each call. The
 * client awaits it after the call, whether the call succeeded or not; it
 * writes on a connection of its own, never in the caller's transaction, and
 * a failure of it is logged, not passed on.
 */
export interface AiCallRecorder {
  record(call: AiCall): Promise<void>;
}

declare module '../base/extension-points.ts' {
  interface ExtensionPoints {
    'core.aiCalls': AiCallRecorder;
  }
}

export const aiCallsPoint = defineExtensionPoint({
  id: 'core.aiCalls',
  describe: 'Recorders of the AI calls the service makes (telemetry), each told of every call, failed ones included.',
  contribution: v.object({ record: v.function() }),
});

/** Where embeddings come from: the local embedder, or an HTTP API. Implement it to add a provider type. */
export interface EmbeddingProvider {
  embed(texts: string[], model: AiModel, provider: AiProvider, signal: AbortSignal): Promise<{ vectors: number[][]; usage: Usage; attempts: number }>;
}

export interface AiClientOptions {
  catalogue: AiCatalogue;
  pool: WorkerPool;
  outbound: Outbound;
  /** The environment keys are read from, by the variable names the catalogue gives. */
  env: Readonly<Record<string, string | undefined>>;
  logger: Logger;
  timeoutMs: number;
  maxRetries: number;
  /** Where the GenAI client metrics are counted; none in a client made outside an app. */
  metrics?: Metrics;
  /** Chat messages and answers on the spans, when the operator opts in (TracingConfig.captureAiContent). */
  captureContent?: boolean;
}

/** Texts per task of the worker pool: big enough to amortise the hand-over, small enough to spread a batch over the threads. */
export const LOCAL_BATCH = 128;
/** A single text up to this long is embedded on the calling thread (it blocks for well under a millisecond). */
const INLINE_CHARACTERS = 2000;
/** Inputs per request to an embeddings API. */
const REMOTE_BATCH = 128;
const MAX_RETRY_WAIT_MS = 10_000;

const zeroUsage = (): Usage => ({ inputTokens: 0, outputTokens: 0, cachedTokens: 0 });

/** A failure worth another attempt: throttling, a server error, no answer. */
class RetryableError extends Error {
  constructor(
    message: string,
    readonly retryAfterMs: number | null = null,
  ) {
    super(message);
  }
}

/**
 * The one way the service calls AI models: embeddings and chat completions,
 * by model id from the catalogue, each call reported to the recorders of
 * `core.aiCalls` whether it succeeds or not (none without a telemetry plugin).
 */
export class AiClient {
  readonly #options: AiClientOptions;
  readonly #local: EmbeddingProvider;
  readonly #remote: OpenAiCompatible;
  #recorders: readonly AiCallRecorder[] = [];

  constructor(options: AiClientOptions) {
    this.#options = options;
    this.#local = new LocalEmbedder(options.pool);
    this.#remote = new OpenAiCompatible(options);
  }

  /** The `core.aiCalls` contributions. */
  load(contributions: readonly Contribution<AiCallRecorder>[]): void {
    this.#recorders = contributions.map(({ value }) => value);
  }

  /** Whether calls to the provider can be made: it needs no key, or the variable the catalogue names holds one. */
  isConfigured(provider: AiProvider): boolean {
    return provider.apiKeyEnvVar === null || Boolean(this.#options.env[provider.apiKeyEnvVar]);
  }

  /** Vectors of EMBEDDING_DIMENSIONS numbers, one per text, L2-normalised by the provider. */
  async embed(ctx: RequestContext, texts: string[], options: AiCallOptions): Promise<EmbedResult> {
    const { model, provider } = this.#resolve(options.model, 'embedding');
    const embedder = provider.type === 'local' ? this.#local : this.#remote;
    return this.#traced(ctx, 'embedding', model, provider, options, async (signal) => {
      const { vectors, usage, attempts } = await embedder.embed(texts, model, provider, signal);
      if (vectors.length !== texts.length || vectors.some((vector) => vector.length !== EMBEDDING_DIMENSIONS)) {
        throw new RpcError(
          'UPSTREAM_ERROR',
          `${provider.name} returned embeddings of the wrong number or size (expected ${texts.length} of ${EMBEDDING_DIMENSIONS})`,
        );
      }
      return { result: { vectors, model: model.id }, usage, attempts };
    });
  }

  async chat(ctx: RequestContext, messages: ChatMessage[], options: ChatOptions): Promise<ChatResult> {
    const { model, provider } = this.#resolve(options.model, 'chat');
    if (provider.type === 'local') throw new RpcError('FEATURE_UNAVAILABLE', `Model ${model.id} cannot chat: its provider is the local embedder`);
    return this.#traced(ctx, 'chat', model, provider, options, async (signal) => {
      const { content, usage, attempts, response } = await this.#remote.chat(messages, model, provider, options, signal);
      return { result: { content, model: model.id }, usage, attempts, response: { ...response, messages, answer: content } };
    });
  }

  #resolve(modelId: string | undefined, category: string): { model: AiModel; provider: AiProvider } {
    const { catalogue } = this.#options;
    const id = modelId ?? catalogue.defaults[category];
    const model = catalogue.models.find((candidate) => candidate.id === id);
    if (!model || model.type !== category) throw new RpcError('FEATURE_UNAVAILABLE', `No ${category} model ${id ?? ''} in the AI catalogue`.replace('  ', ' '));
    return { model, provider: catalogue.providers.find((candidate) => candidate.name === model.provider)! };
  }

  /**
   * Runs a call of the model, records it (`core.aiCalls`) and makes it a
   * span in OpenTelemetry's GenAI conventions (genAiRequest, genAiResponse):
   * one span for the whole call, its retries included; its content only when
   * the operator opts in.
   */
  #traced<T extends object>(
    ctx: RequestContext,
    operation: 'embedding' | 'chat',
    model: AiModel,
    provider: AiProvider,
    options: ChatOptions,
    call: (signal: AbortSignal) => Promise<{ result: T; usage: Usage; attempts: number; response?: GenAiResponse }>,
  ): Promise<T & { usage: Usage; traceId: string }> {
    let usage = zeroUsage();
    let response: GenAiResponse = {};
    const request = genAiRequest(operation, model, provider, options);
    return inSpan(
      {
        name: `${request['gen_ai.operation.name']} ${model.id}`,
        // In-process models are INTERNAL, the conventions say; a provider over HTTP is a CLIENT.
        kind: provider.type === 'local' ? SpanKind.INTERNAL : SpanKind.CLIENT,
        attributes: request,
        outcome: (span) => span.setAttributes(genAiResponse(model, usage, response, this.#options.captureContent === true)),
      },
      async () => {
        const outcome = await this.#recorded(ctx, operation, model, provider, options, call);
        ({ usage } = outcome);
        response = outcome.response ?? {};
        return { ...outcome.result, usage, traceId: outcome.traceId };
      },
    );
  }

  async #recorded<T extends object>(
    ctx: RequestContext,
    operation: 'embedding' | 'chat',
    model: AiModel,
    provider: AiProvider,
    options: AiCallOptions,
    call: (signal: AbortSignal) => Promise<{ result: T; usage: Usage; attempts: number; response?: GenAiResponse }>,
  ): Promise<{ result: T; usage: Usage; traceId: string; response?: GenAiResponse }> {
    const traceId = randomUUID();
    const requestTimestamp = new Date();
    const started = performance.now();
    let usage = zeroUsage();
    let attempts = 1;
    let error: string | null = null;
    /** The failure's code, for the metrics: ours, never a message. */
    let errorType = '';
    try {
      const outcome = await call(AbortSignal.timeout(this.#options.timeoutMs * (this.#options.maxRetries + 1)));
      ({ usage, attempts } = outcome);
      return { result: outcome.result, usage, traceId, response: outcome.response };
    } catch (thrown) {
      error = (thrown as Error).message;
      attempts = (thrown as { attempts?: number }).attempts ?? attempts;
      const failure = thrown instanceof RpcError ? thrown : new RpcError('UPSTREAM_ERROR', `${provider.name} ${operation} failed: ${error}`, { cause: thrown });
      errorType = failure.code;
      throw failure;
    } finally {
      this.#measure(operation, model, provider, usage, (performance.now() - started) / 1000, errorType);
      await this.#record({
        traceId,
        subscriptionId: ctx.subscriptionId,
        userId: ctx.userId,
        threadId: options.threadId ?? null,
        requestTimestamp,
        durationMs: Math.round(performance.now() - started),
        status: error === null ? 'success' : 'error',
        provider: provider.name,
        model: model.id,
        operation,
        callerType: options.caller.type,
        callerName: options.caller.name,
        inputTokens: usage.inputTokens,
        outputTokens: usage.outputTokens,
        cachedTokens: usage.cachedTokens,
        totalTokens: usage.inputTokens + usage.outputTokens,
        costUsd: costOf(model, usage),
        attempts,
        error,
      });
    }
  }

  /** The call in the GenAI client metrics: its duration, and its tokens of each type when it used some. */
  #measure(operation: 'embedding' | 'chat', model: AiModel, provider: AiProvider, usage: Usage, seconds: number, errorType: string): void {
    const metrics = this.#options.metrics;
    if (!metrics) return;
    const labels = { gen_ai_operation_name: GEN_AI_OPERATIONS[operation], gen_ai_provider_name: provider.name, gen_ai_request_model: model.id };
    metrics.aiDuration.observe({ ...labels, error_type: errorType }, seconds);
    if (errorType !== '') return;
    metrics.aiTokens.observe({ ...labels, gen_ai_token_type: 'input' }, usage.inputTokens);
    if (operation === 'chat') metrics.aiTokens.observe({ ...labels, gen_ai_token_type: 'output' }, usage.outputTokens);
  }

  /** Telemetry never fails the call it describes. */
  async #record(call: AiCall): Promise<void> {
    for (const recorder of this.#recorders) {
      try {
        await recorder.record(call);
      } catch (err) {
        this.#options.logger.warn({ err, traceId: call.traceId }, 'could not record an AI call');
      }
    }
  }
}

/** What a provider said of its answer, for the span: its id, the model that answered, why it stopped; a chat's messages and answer. */
interface GenAiResponse {
  id?: string;
  model?: string;
  finishReasons?: string[];
  messages?: readonly ChatMessage[];
  answer?: string;
}

/** The GenAI conventions' operation names (gen_ai.operation.name). */
const GEN_AI_OPERATIONS = { embedding: 'embeddings', chat: 'chat' } as const;

/** A call's attributes as OpenTelemetry's GenAI conventions name them, known before it is made. */
function genAiRequest(operation: 'embedding' | 'chat', model: AiModel, provider: AiProvider, options: ChatOptions): Record<string, string | number> {
  const server = provider.baseUrl ? new URL(provider.baseUrl) : null;
  return {
    'gen_ai.operation.name': GEN_AI_OPERATIONS[operation],
    'gen_ai.provider.name': provider.name,
    'gen_ai.request.model': model.id,
    ...(operation === 'embedding' ? { 'gen_ai.embeddings.dimension.count': EMBEDDING_DIMENSIONS } : {}),
    ...(options.temperature === undefined ? {} : { 'gen_ai.request.temperature': options.temperature }),
    ...(options.maxTokens === undefined ? {} : { 'gen_ai.request.max_tokens': options.maxTokens }),
    ...(options.threadId ? { 'gen_ai.conversation.id': options.threadId } : {}),
    ...(server ? { 'server.address': server.hostname, 'server.port': Number(server.port || (server.protocol === 'https:' ? 443 : 80)) } : {}),
  };
}

/**
 * What the answer tells, in the same conventions: the model that answered, the
 * tokens, why it stopped; with `content`, the chat's messages and answer as
 * the conventions' JSON (each message a role and its parts).
 */
function genAiResponse(model: AiModel, usage: Usage, response: GenAiResponse, content: boolean): Record<string, string | number | string[]> {
  const text = (value: string) => [{ type: 'text', content: value }];
  const captured: Record<string, string> =
    content && response.messages && response.answer !== undefined
      ? {
          'gen_ai.input.messages': JSON.stringify(response.messages.map((message) => ({ role: message.role, parts: text(message.content) }))),
          'gen_ai.output.messages': JSON.stringify([
            { role: 'assistant', parts: text(response.answer), ...(response.finishReasons?.[0] ? { finish_reason: response.finishReasons[0] } : {}) },
          ]),
        }
      : {};
  return {
    ...captured,
    'gen_ai.response.model': response.model ?? model.id,
    'gen_ai.usage.input_tokens': usage.inputTokens,
    'gen_ai.usage.output_tokens': usage.outputTokens,
    ...(response.id ? { 'gen_ai.response.id': response.id } : {}),
    ...(response.finishReasons?.length ? { 'gen_ai.response.finish_reasons': response.finishReasons } : {}),
  };
}

/** The local lexical embedder (workers/embed.ts), batches spread over the worker pool. */
class LocalEmbedder implements EmbeddingProvider {
  constructor(private readonly pool: WorkerPool) {}

  async embed(texts: string[]): Promise<{ vectors: number[][]; usage: Usage; attempts: number }> {
    const batches: string[][] = [];
    for (let start = 0; start < texts.length; start += LOCAL_BATCH) batches.push(texts.slice(start, start + LOCAL_BATCH));
    const results = await Promise.all(
      batches.map((batch) =>
        // A short text (a query) takes tens of microseconds here; handing it to a worker thread would take a millisecond or more.
        batch.length === 1 && batch[0]!.length <= INLINE_CHARACTERS
          ? embedInThisThread({ texts: batch, dimensions: EMBEDDING_DIMENSIONS })
          : this.pool.run<EmbedWorkerResult>('embed', { texts: batch, dimensions: EMBEDDING_DIMENSIONS }),
      ),
    );
    return {
      vectors: results.flatMap((result) => vectorsOf(result.vectors, EMBEDDING_DIMENSIONS)),
      usage: { ...zeroUsage(), inputTokens: results.reduce((sum, result) => sum + result.tokens, 0) },
      attempts: 1,
    };
  }
}

interface OpenAiUsage {
  prompt_tokens?: number;
  completion_tokens?: number;
  prompt_tokens_details?: { cached_tokens?: number };
}

const usageOf = (usage: OpenAiUsage | undefined): Usage => ({
  inputTokens: usage?.prompt_tokens ?? 0,
  outputTokens: usage?.completion_tokens ?? 0,
  cachedTokens: usage?.prompt_tokens_details?.cached_tokens ?? 0,
});

const addUsage = (a: Usage, b: Usage): Usage => ({
  inputTokens: a.inputTokens + b.inputTokens,
  outputTokens: a.outputTokens + b.outputTokens,
  cachedTokens: a.cachedTokens + b.cachedTokens,
});

/**
 * Any API speaking OpenAI's `/v1/embeddings` and `/v1/chat/completions`
 * (OpenAI, Ollama, vLLM, ...), through the outbound guard, with the key from
 * the environment variable the catalogue names, a time limit per attempt and
 * retries on 429, 5xx and lost connections.
 */
class OpenAiCompatible implements EmbeddingProvider {
  constructor(private readonly options: AiClientOptions) {}

  async embed(texts: string[], model: AiModel, provider: AiProvider, signal: AbortSignal) {
    let usage = zeroUsage();
    let attempts = 0;
    const vectors: number[][] = [];
    for (let start = 0; start < texts.length; start += REMOTE_BATCH) {
      const answer = await this.#post<{ data: { index: number; embedding: number[] }[]; usage?: OpenAiUsage }>(
        provider,
        'embeddings',
        { model: model.id, input: texts.slice(start, start + REMOTE_BATCH), dimensions: EMBEDDING_DIMENSIONS },
        signal,
      );
      attempts += answer.attempts;
      usage = addUsage(usage, usageOf(answer.body.usage));
      vectors.push(...[...answer.body.data].sort((a, b) => a.index - b.index).map((item) => item.embedding));
    }
    return { vectors, usage, attempts };
  }

  async chat(messages: ChatMessage[], model: AiModel, provider: AiProvider, options: ChatOptions, signal: AbortSignal) {
    const answer = await this.#post<{
      id?: string;
      model?: string;
      choices: { message: { content: string | null }; finish_reason?: string | null }[];
      usage?: OpenAiUsage;
    }>(
      provider,
      'chat/completions',
      {
        model: model.id,
        messages,
        ...(options.temperature !== undefined ? { temperature: options.temperature } : {}),
        ...(options.maxTokens !== undefined ? { max_tokens: options.maxTokens } : {}),
      },
      signal,
    );
    const response: GenAiResponse = {
      id: answer.body.id,
      model: answer.body.model,
      finishReasons: answer.body.choices.flatMap((choice) => (choice.finish_reason ? [choice.finish_reason] : [])),
    };
    return { content: answer.body.choices[0]?.message.content ?? '', usage: usageOf(answer.body.usage), attempts: answer.attempts, response };
  }

  async #post<T>(provider: AiProvider, route: string, body: object, signal: AbortSignal): Promise<{ body: T; attempts: number }> {
    const { outbound, env, timeoutMs, maxRetries } = this.options;
    const headers: Record<string, string> = { 'content-type': 'application/json' };
    if (provider.apiKeyEnvVar) {
      const key = env[provider.apiKeyEnvVar];
      if (!key) throw new RpcError('FEATURE_UNAVAILABLE', `AI provider ${provider.name} is not configured: set ${provider.apiKeyEnvVar}`);
      headers.authorization = `Bearer ${key}`;
    }
    const url = `${provider.baseUrl!.replace(/\/+$/, '')}/${route}`;
    for (let attempt = 1; ; attempt++) {
      try {
        const response = await outbound
          .fetch(url, {
            method: 'POST',
            headers,
            body: JSON.stringify(body),
            maxRedirects: 0,
            signal: AbortSignal.any([signal, AbortSignal.timeout(timeoutMs)]),
          })
          .catch((error: Error) => {
            if (signal.aborted || error instanceof OutboundRefusedError) throw error;
            throw new RetryableError(error.name === 'TimeoutError' ? `no answer within ${timeoutMs} ms` : ((error.cause as Error)?.message ?? error.message));
          });
        if (response.ok) return { body: (await response.json()) as T, attempts: attempt };
        const detail = `${provider.name} answered ${response.status}`;
        await response.body?.cancel().catch(() => undefined);
        if (response.status === 429 || response.status >= 500) {
          const retryAfter = Number(response.headers.get('retry-after'));
          throw new RetryableError(detail, Number.isFinite(retryAfter) && retryAfter > 0 ? retryAfter * 1000 : null);
        }
        throw Object.assign(new RpcError('UPSTREAM_ERROR', detail), { attempts: attempt });
      } catch (error) {
        if (!(error instanceof RetryableError) || attempt > maxRetries) throw Object.assign(error as Error, { attempts: attempt });
        const wait = Math.min(error.retryAfterMs ?? 250 * 4 ** (attempt - 1), MAX_RETRY_WAIT_MS);
        await new Promise((resolve) => setTimeout(resolve, wait));
      }
    }
  }
}
