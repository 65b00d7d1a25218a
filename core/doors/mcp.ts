import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Server } from '@modelcontextprotocol/sdk/server/index.js';
import type { Tool } from '@modelcontextprotocol/sdk/types.js';
import { presentedCredentials } from '../credentials/authenticator.ts';
import type { Principal } from '../base/context.ts';
import { errorBody, type DispatchResult } from '../rpc/dispatch.ts';
import { RpcError } from '../base/errors.ts';
import { jsonRpcCode } from '../rpc/json-rpc-codes.ts';
import { answerData } from '../rpc/operation.ts';
import { jsonSchemaOf, type RegisteredOperation, type Registry } from '../rpc/registry.ts';
import { errorAnswer, JSON_RPC_BATCH_LIMIT } from './json-rpc.ts';
import { readBody } from './read-body.ts';
import { baseUrlOf, HttpTransport } from './request-info.ts';
import { AnswerBudget, recordCall, send, type RpcEndpoint } from './rpc-reply.ts';
import { onFirstUse } from '../base/on-first-use.ts';
import { executeToolAttributes, failedWith, inSpan, remoteParent, SpanKind } from '../base/tracing.ts';
import type { ResourceCatalogue, ResourceDeclaration } from '../rpc/resources.ts';

/**
 * An MCP server at `/mcp` (Streamable HTTP, stateless, on the official SDK):
 * every operation the caller may run (its role, and its key's scopes) is a tool, called through the same
 * dispatcher as `POST /api/rpc` with the caller's own credentials, so an
 * agent can do exactly what its API key (or session) can, and no more.
 */
export interface McpEndpoint extends RpcEndpoint {
  version: string;
  /** What plugins offer as resources (`core.resources`). */
  resources: ResourceCatalogue;
}

/** Resources in one `resources/list` answer at most, and the lists of declarations one answer may ask for looking for some. */
const RESOURCE_PAGE = 50;
const RESOURCE_STEPS = 20;

/** A `resources/list` cursor: which declaration the listing is at, and that declaration's own cursor. */
const encodeCursor = (at: number, inner: string | undefined) => Buffer.from(JSON.stringify([at, inner ?? null])).toString('base64url');
function decodeCursor(cursor: string | undefined): [number, string | undefined] | undefined {
  if (cursor === undefined) return [0, undefined];
  try {
    const [at, inner] = JSON.parse(Buffer.from(cursor, 'base64url').toString('utf8')) as unknown[];
    if (Number.isInteger(at) && (at as number) >= 0 && (inner === null || typeof inner === 'string')) return [at as number, inner ?? undefined];
  } catch {
    // not one of ours
  }
  return undefined;
}

/** The MCP specification's code for a resource that does not exist. */
const RESOURCE_NOT_FOUND = -32002;

/** MCP tool names: `Group_operation`, as clients that follow the tool-name pattern [A-Za-z0-9_-] refuse dots. */
export const toolName = (method: string): string => method.replace('.', '_');

interface ToolEntry {
  tool: Tool;
  operation: RegisteredOperation;
  /** The size of the tool in a tools/list answer, counted against the request's AnswerBudget. */
  bytes: number;
}

/** Every operation as a tool, made once: inputs and outputs from its schemas, hints from its kind. */
function toolsOf(registry: Registry): Map<string, ToolEntry> {
  const tools = new Map<string, ToolEntry>();
  for (const operation of registry.all()) {
    const output = operation.result ? jsonSchemaOf(operation.result) : undefined;
    const read = operation.kind === 'read';
    const tool: Tool = {
      name: toolName(operation.method),
      title: operation.method,
      description: operation.describe,
      inputSchema: jsonSchemaOf(operation.params) as Tool['inputSchema'],
      // MCP's structured output is an object; other results travel as text only.
      ...(output?.type === 'object' ? { outputSchema: output as Tool['outputSchema'] } : {}),
      annotations: { readOnlyHint: read, destructiveHint: !read, openWorldHint: false },
    };
    tools.set(tool.name, { tool, operation, bytes: Buffer.byteLength(JSON.stringify(tool)) });
  }
  return tools;
}

/** A tool error the model can read and act on: our code, the message, the issues. */
const toolError = (error: RpcError, errorId?: string) => ({
  isError: true,
  content: [{ type: 'text' as const, text: JSON.stringify(errorBody(error, errorId)) }],
});

/** What a tool call answers, and its size (a structured result travels twice: as text and as structure). */
function toolResult(outcome: DispatchResult, entry: ToolEntry) {
  if (!outcome.ok) {
    const result = toolError(outcome.error, outcome.errorId);
    return { result, bytes: Buffer.byteLength(result.content[0]!.text) };
  }
  const data = answerData(outcome.result);
  const text = JSON.stringify(data);
  const result = {
    content: [{ type: 'text' as const, text }],
    ...(entry.tool.outputSchema ? { structuredContent: data as Record<string, unknown> } : {}),
  };
  return { result, bytes: Buffer.byteLength(text) * (entry.tool.outputSchema ? 2 : 1) };
}

/** The MCP SDK, loaded by the first MCP request: a service no agent calls does not carry it (some 30 MB, a quarter of a second). */
const loadSdk = onFirstUse(() =>
  Promise.all([
    import('@modelcontextprotocol/sdk/server/index.js'),
    import('@modelcontextprotocol/sdk/server/streamableHttp.js'),
    import('@modelcontextprotocol/sdk/types.js'),
  ]).then(([server, http, types]) => ({ ...server, ...http, ...types })),
);

export function createMcpEndpoint(endpoint: McpEndpoint) {
  const tools = toolsOf(endpoint.registry);

  /**
   * One MCP server per request (stateless), for the caller its credentials
   * name. A batch's requests run one after another, as JSON-RPC's do
   * (json-rpc.ts), and their answers share one AnswerBudget; tools/list is
   * answered once per request and metered like a tool call.
   */
  const serverFor = (sdk: Awaited<ReturnType<typeof loadSdk>>, principal: Principal, req: IncomingMessage, requestId: string): Server => {
    const { Server, CallToolRequestSchema, ListToolsRequestSchema, ListResourcesRequestSchema, ListResourceTemplatesRequestSchema, ReadResourceRequestSchema } =
      sdk;
    const { McpError, ErrorCode } = sdk;
    const server = new Server(
      { name: 'rpc-service', version: endpoint.version },
      { capabilities: { tools: { listChanged: false }, resources: { listChanged: false } } },
    );
    const transport = new HttpTransport(req, endpoint.options);
    const budget = new AnswerBudget(endpoint.options);
    let listed = false;
    let turn: Promise<unknown> = Promise.resolve();
    const inTurn = <T>(work: () => Promise<T>): Promise<T> => {
      const next = turn.then(work);
      turn = next.catch(() => undefined);
      return next;
    };
    const mcpError = (error: RpcError) => new McpError(jsonRpcCode(error.code, error.status), error.message, errorBody(error));
    /** An error of an operation a resource is read through, as MCP says it: an unknown resource is -32002 (its specification's code). */
    const resourceError = (thrown: unknown, method: string) => {
      if (thrown instanceof McpError) return thrown;
      const { error } = endpoint.pipeline.failure(thrown, { requestId, method });
      return error.code === 'NOT_FOUND' ? new McpError(RESOURCE_NOT_FOUND, error.message, errorBody(error)) : mcpError(error);
    };
    /** Calls an operation for a resource as this caller, counted and logged as any call. */
    const call = async (method: string, params: Record<string, unknown>) => {
      const started = performance.now();
      const outcome = await endpoint.dispatcher.dispatch({ method, params, requestId, principal, transport, traceHeaders: req.headers });
      recordCall(endpoint, requestId, method, outcome, started);
      if (!outcome.ok) throw outcome.error;
      return answerData(outcome.result);
    };
    /** Declarations the caller may read: the first operation each reads through is permitted. */
    const readable = () =>
      endpoint.resources.list().filter((declaration) => endpoint.pipeline.permits(endpoint.registry.get(declaration.operations[0])!, principal));
    const answer = <T>(result: T): T => {
      if (!budget.take(Buffer.byteLength(JSON.stringify(result)))) throw mcpError(budget.refusal(true));
      return result;
    };

    server.setRequestHandler(ListResourceTemplatesRequestSchema, () =>
      inTurn(async () =>
        answer({
          resourceTemplates: readable().map((declaration) => ({
            uriTemplate: declaration.template,
            name: declaration.name,
            title: declaration.title,
            description: declaration.describe,
            mimeType: declaration.mimeType,
          })),
        }),
      ),
    );
    server.setRequestHandler(ListResourcesRequestSchema, (request) =>
      inTurn(async () => {
        const position = decodeCursor(request.params?.cursor);
        if (!position) throw new McpError(ErrorCode.InvalidParams, 'Unknown cursor: pass the nextCursor of the previous answer');
        const offered = readable();
        let [at, inner] = position;
        // A page holds one declaration's resources. An empty page is passed over (to the declaration's next page, or
        // the next declaration), as is a declaration this caller may not list; at most RESOURCE_STEPS lists per request.
        for (let steps = 0; at < offered.length && steps < RESOURCE_STEPS; steps++) {
          const declaration: ResourceDeclaration = offered[at]!;
          let page: Awaited<ReturnType<NonNullable<ResourceDeclaration['list']>>> = { resources: [], next: null };
          try {
            if (declaration.list) page = await declaration.list(call, inner, RESOURCE_PAGE);
          } catch (thrown) {
            if (!(thrown instanceof RpcError && (thrown.code === 'FORBIDDEN' || thrown.code === 'NOT_FOUND'))) {
              throw resourceError(thrown, `resources/list ${declaration.name}`);
            }
          }
          [at, inner] = page.next !== null ? [at, page.next] : [at + 1, undefined];
          if (page.resources.length === 0) continue;
          const resources = page.resources.map((resource) => ({ mimeType: declaration.mimeType, ...resource }));
          return answer({ resources, ...(at < offered.length ? { nextCursor: encodeCursor(at, inner) } : {}) });
        }
        return answer({ resources: [], ...(at < offered.length ? { nextCursor: encodeCursor(at, inner) } : {}) });
      }),
    );
    server.setRequestHandler(ReadResourceRequestSchema, (request) =>
      inTurn(async () => {
        const uri = request.params.uri;
        const found = endpoint.resources.match(uri);
        if (!found) throw new McpError(RESOURCE_NOT_FOUND, `No resource has the URI ${uri.slice(0, 200)}`);
        try {
          const content = await found.declaration.read(call, found.values);
          return answer({ contents: [{ uri, mimeType: found.declaration.mimeType, ...content }] });
        } catch (thrown) {
          throw resourceError(thrown, `resources/read ${found.declaration.name}`);
        }
      }),
    );

    server.setRequestHandler(ListToolsRequestSchema, () =>
      inTurn(async () => {
        if (listed) throw new McpError(ErrorCode.InvalidRequest, 'tools/list is answered once per request: this batch asked for it before');
        listed = true;
        try {
          await endpoint.pipeline.meter(principal);
        } catch (thrown) {
          throw mcpError(endpoint.pipeline.failure(thrown, { requestId, method: 'tools/list' }).error);
        }
        const permitted = [...tools.values()].filter((entry) => endpoint.pipeline.permits(entry.operation, principal));
        if (!budget.take(permitted.reduce((bytes, entry) => bytes + entry.bytes, 0))) throw mcpError(budget.refusal(true));
        return { tools: permitted.map((entry) => entry.tool) };
      }),
    );
    server.setRequestHandler(CallToolRequestSchema, (request, extra) =>
      inTurn(async () => {
        const entry = tools.get(request.params.name);
        if (!entry) throw new McpError(ErrorCode.InvalidParams, `Unknown tool ${request.params.name}`);
        if (budget.spent) return toolError(budget.refusal(false));
        const started = performance.now();
        // A tool call continues the agent's trace when its request carries a traceparent, as an RPC call does; its span is
        // the GenAI conventions' execute_tool, named as their MCP conventions name a tools/call, with the operation's inside.
        const outcome = await inSpan(
          {
            name: `tools/call ${entry.tool.name}`,
            kind: SpanKind.SERVER,
            parent: remoteParent(req.headers),
            attributes: {
              'mcp.method.name': 'tools/call',
              'jsonrpc.request.id': String(extra.requestId),
              ...executeToolAttributes(entry.tool.name, String(extra.requestId)),
            },
            outcome: (span, result) => (result.ok ? undefined : failedWith(span, result.error.code)),
          },
          () =>
            endpoint.dispatcher.dispatch({
              method: entry.operation.method,
              params: request.params.arguments ?? {},
              requestId,
              principal,
              transport,
            }),
        );
        recordCall(endpoint, requestId, entry.operation.method, outcome, started);
        const { result, bytes } = toolResult(outcome, entry);
        return budget.take(bytes) ? result : toolError(budget.refusal(true));
      }),
    );
    return server;
  };

  return (req: IncomingMessage, res: ServerResponse, requestId: string): void => {
    if (req.method !== 'POST') {
      // Stateless: no stream to resume (GET) and no session to end (DELETE).
      res.writeHead(405, { allow: 'POST', 'x-request-id': requestId }).end();
      return;
    }
    readBody(req, endpoint.options.bodyLimitBytes, {
      onBody: (readError, text) => {
        if (readError) {
          const refusedBody = readError.code === 'PAYLOAD_TOO_LARGE' ? { req, limit: endpoint.options.bodyLimitBytes } : undefined;
          return send(res, readError.status, { success: false, data: errorBody(readError) }, { requestId, refusedBody });
        }
        void answer(text).catch((err) => {
          endpoint.logger.error({ err, requestId }, 'mcp request failed');
          if (!res.headersSent) refuse(res, new RpcError('INTERNAL', 'Internal error'), requestId);
        });
      },
    });

    /**
     * What a 401 answers in WWW-Authenticate: with OAuth, where its protected
     * resource metadata is (RFC 9728 section 5.1), so an MCP client can start
     * the authorization flow from nothing; `invalid` when a token was refused.
     */
    function challenge(invalid: boolean): string {
      if (!endpoint.pipeline.accepts('oauth')) return 'Bearer';
      const metadata = `${baseUrlOf(req, endpoint.options)}/.well-known/oauth-protected-resource/mcp`;
      return `Bearer ${invalid ? 'error="invalid_token", ' : ''}resource_metadata="${metadata}"`;
    }

    async function answer(text: string): Promise<void> {
      let body: unknown;
      try {
        body = JSON.parse(text);
      } catch {
        return refuse(res, new RpcError('BAD_REQUEST', 'Request body is not valid JSON'), requestId);
      }
      if (Array.isArray(body) && body.length > JSON_RPC_BATCH_LIMIT) {
        const error = new RpcError('BAD_REQUEST', `A batch of ${body.length} messages: at most ${JSON_RPC_BATCH_LIMIT} are taken`);
        return send(res, 400, errorAnswer(null, error, requestId), { requestId });
      }
      let principal: Principal | null;
      try {
        principal = await endpoint.pipeline.principalFor(presentedCredentials(req.headers, undefined, 'mcp'), 'user');
      } catch (error) {
        return refuse(res, endpoint.pipeline.failure(error, { requestId, method: 'mcp' }).error, requestId, challenge(true));
      }
      if (!principal) {
        const error = new RpcError('UNAUTHENTICATED', 'Authentication required: authorize this client with OAuth, or send X-API-Key or a session token');
        return refuse(res, error, requestId, challenge(false));
      }
      const sdk = await loadSdk();
      const server = serverFor(sdk, principal, req, requestId);
      const transport = new sdk.StreamableHTTPServerTransport({ sessionIdGenerator: undefined, enableJsonResponse: true });
      res.on('close', () => {
        void transport.close();
        void server.close();
      });
      await server.connect(transport);
      res.setHeader('x-request-id', requestId);
      await transport.handleRequest(req, res, body);
    }
  };
}

/** A refusal before MCP is spoken (no credential, a body that is not JSON): the HTTP status and our error envelope. */
function refuse(res: ServerResponse, error: RpcError, requestId: string, challenge = 'Bearer'): void {
  if (error.status === 401) res.setHeader('www-authenticate', challenge);
  send(res, error.status, { success: false, data: errorBody(error) }, { requestId });
}
