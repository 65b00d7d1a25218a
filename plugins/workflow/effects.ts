import {
  executeToolAttributes,
  OutboundRefusedError,
  RpcError,
  type AiClient,
  type AuthenticatedContext,
  type Extensions,
  type OperationCaller,
  type Outbound,
  type Principal,
  type ToolCatalogue,
} from 'rpc-service/plugin';
import type { WorkflowConfig } from './config.ts';
import type { WorkflowInstance } from './instance.entity.ts';
import type { EffectReply, EffectRequest } from './interpreter.worker.ts';
import type { NodeRunInput } from './node-types.ts';
import { inSpan } from './run-spans.ts';

type OutboundResponse = Awaited<ReturnType<Outbound['fetch']>>;

/** An http node's request as the interpreter gives it, its templates rendered. */
interface HttpInput {
  url: string;
  method: string;
  headers: Record<string, string>;
  body?: unknown;
}

/** Largest HTTP answer body an http node reads. */
const MAX_HTTP_BODY = 1024 * 1024;

/**
 * The work of the nodes the interpreter hands to the host (runner.ts runs
 * the interpreter in a worker thread): each done as the run's user, its
 * failure told to the run as a message, never thrown.
 */
export class NodeEffects {
  readonly #operations: OperationCaller;
  readonly #outbound: Outbound;
  readonly #ai: AiClient;
  readonly #tools: ToolCatalogue;
  readonly #extensions: Extensions;
  readonly #config: WorkflowConfig;

  constructor(deps: { operations: OperationCaller; outbound: Outbound; ai: AiClient; tools: ToolCatalogue; extensions: Extensions; config: WorkflowConfig }) {
    this.#operations = deps.operations;
    this.#outbound = deps.outbound;
    this.#ai = deps.ai;
    this.#tools = deps.tools;
    this.#extensions = deps.extensions;
    this.#config = deps.config;
  }

  /**
   * Does the work of a node for the run's user: an operation, a tool, an HTTP
   * request, a chat completion or a contributed type. Its input is what the
   * interpreter built for that type (interpreter.worker.ts, #inputs).
   */
  async run(principal: Principal, ctx: AuthenticatedContext, instance: WorkflowInstance, request: EffectRequest, stopped: () => boolean): Promise<EffectReply> {
    if (stopped()) return { id: request.id, ok: false, error: 'the run was cancelled' };
    const { input } = request;
    try {
      switch (request.type) {
        case 'rpc':
          return { id: request.id, ok: true, value: (await this.#operations.as(principal).call(input.method as string, input.params)) ?? null };
        case 'tool': {
          const tool = this.#tools.get(input.tool as string);
          if (!tool) return { id: request.id, ok: false, error: `${input.tool} is not an available tool` };
          return await inSpan(`execute_tool ${tool.name}`, executeToolAttributes(tool.name, `${instance.id}:${request.node}`), async () => ({
            id: request.id,
            ok: true as const,
            value: (await this.#operations.as(principal).call(tool.method, input.params)) ?? null,
          }));
        }
        case 'http':
          // The interpreter built it from an http node's checked config (interpreter.worker.ts, #inputs).
          return { id: request.id, ok: true, value: await this.#http(input as unknown as HttpInput) };
        case 'ai': {
          const messages = [
            ...(input.system ? [{ role: 'system' as const, content: input.system as string }] : []),
            { role: 'user' as const, content: input.prompt as string },
          ];
          const answer = await this.#ai.chat(ctx, messages, {
            model: input.model as string | undefined,
            caller: { type: 'workflow', name: instance.workflowName },
            threadId: instance.id,
          });
          return { id: request.id, ok: true, value: answer.content };
        }
        default: {
          const contributed = this.#extensions.get('workflow.nodeTypes').find(({ value }) => value.type === request.type);
          if (!contributed) return { id: request.id, ok: false, error: `no node type ${request.type} is loaded` };
          // A contributed type's input is {config, variables, args}, as the interpreter builds it for any type it does not know.
          return { id: request.id, ok: true, value: (await contributed.value.run(ctx, input as unknown as NodeRunInput)) ?? null };
        }
      }
    } catch (error) {
      if (error instanceof RpcError) return { id: request.id, ok: false, error: `${error.code}: ${error.message}` };
      if (error instanceof OutboundRefusedError) return { id: request.id, ok: false, error: error.message };
      ctx.log.error({ err: error, instanceId: instance.id, node: request.node }, 'a workflow node failed');
      return { id: request.id, ok: false, error: 'the node failed' };
    }
  }

  /** An http node's request, through the outbound guard: `{status, headers, body}` (JSON parsed when the answer says so). */
  async #http(input: HttpInput): Promise<unknown> {
    const json = input.body !== undefined && typeof input.body !== 'string';
    let response: OutboundResponse;
    try {
      response = await this.#outbound.fetch(input.url, {
        method: input.method,
        headers: { ...(json ? { 'content-type': 'application/json' } : {}), ...input.headers },
        body: input.body === undefined || input.method === 'GET' ? undefined : json ? JSON.stringify(input.body) : (input.body as string),
        signal: AbortSignal.timeout(this.#config.WORKFLOW_HTTP_TIMEOUT_MS),
      });
    } catch (error) {
      if (error instanceof OutboundRefusedError) throw error;
      throw new RpcError(
        'UPSTREAM_ERROR',
        `${input.method} ${input.url} failed: ${(error as Error).name === 'TimeoutError' ? 'no answer in time' : 'the connection failed'}`,
      );
    }
    const text = await readText(response, MAX_HTTP_BODY);
    const type = response.headers.get('content-type') ?? '';
    let body: unknown = text;
    if (/json/i.test(type)) {
      try {
        body = JSON.parse(text);
      } catch {
        body = text;
      }
    }
    return { status: response.status, headers: Object.fromEntries(response.headers), body };
  }
}

async function readText(response: OutboundResponse, maxBytes: number): Promise<string> {
  const parts: Buffer[] = [];
  let size = 0;
  for await (const part of response.body ?? []) {
    size += part.length;
    if (size > maxBytes) throw new RpcError('UPSTREAM_ERROR', `the answer is larger than ${maxBytes} bytes`);
    parts.push(Buffer.from(part));
  }
  return Buffer.concat(parts).toString('utf8');
}
