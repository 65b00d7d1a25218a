import type { IncomingMessage, ServerResponse } from 'node:http';
import { presentedCredentials } from '../credentials/authenticator.ts';
import type { RateLimiter } from '../rate-limits/rate-limiter.ts';
import type { DispatchResult } from '../rpc/dispatch.ts';
import { RpcError, validationError } from '../base/errors.ts';
import { jsonRpcCode, PARSE_ERROR } from '../rpc/json-rpc-codes.ts';
import { openRpcFor } from '../rpc/openrpc.ts';
import { answerData } from '../rpc/operation.ts';
import { withContext } from '../base/tracing.ts';
import type { HttpTransport } from './request-info.ts';
import { AnswerBudget, recordCall, send, sendText, type RpcEndpoint } from './rpc-reply.ts';

/**
 * JSON-RPC 2.0 at `POST /api/rpc` (https://www.jsonrpc.org/specification),
 * beside the spec's envelope: an object with a `jsonrpc` member, or a batch
 * (an array holding one). Each call runs through the same dispatcher as the
 * spec's envelope (credentials, access, validation, handler, metrics, logs);
 * only the envelope differs.
 */

/** Most calls one batch may carry; its calls run one after another, as that many requests on one connection would. */
export const JSON_RPC_BATCH_LIMIT = 50;

/**
 * `rpc.discover` calls one address may make a minute without a credential.
 * With one, discovery counts against the credential's own rate, as its calls do.
 */
export const DISCOVER_PER_MINUTE = 30;

/**
 * Counts a discovery without a credential against its address's
 * DISCOVER_PER_MINUTE: `rpc.discover`, `GET /openrpc.json` and `GET /api/rpc`
 * (core/doors/routes.ts) share the one count, as each answers the large
 * listing of everything.
 */
export const meterAnonymousDiscovery = (rateLimiter: RateLimiter, clientIp: string): Promise<void> =>
  rateLimiter.take(`rpc.discover:${clientIp}`, DISCOVER_PER_MINUTE, 60);

type Id = string | number | null;

/** The metrics and log line of a call (recordCall), the line written inside the call's span when it was traced. */
export function recordTracedCall(endpoint: RpcEndpoint, requestId: string, method: string, outcome: DispatchResult, started: number): void {
  if (outcome.trace) withContext(outcome.trace, () => recordCall(endpoint, requestId, method, outcome, started));
  else recordCall(endpoint, requestId, method, outcome, started);
}

const hasJsonRpcMember = (item: unknown): boolean => typeof item === 'object' && item !== null && !Array.isArray(item) && Object.hasOwn(item, 'jsonrpc');

/**
 * Whether a parsed body is JSON-RPC 2.0 rather than the spec's envelope: an
 * object with a `jsonrpc` member, or a batch holding one. Anything else (an
 * empty array, say) is the spec's envelope, and answered as it always was.
 */
export const isJsonRpc = (body: unknown): boolean => hasJsonRpcMember(body) || (Array.isArray(body) && body.some(hasJsonRpcMember));

/** Whether a body that is not JSON was meant as JSON-RPC: it is then answered with JSON-RPC's parse error. */
export const looksLikeJsonRpc = (text: string): boolean => text.includes('"jsonrpc"');

interface Call {
  id: Id;
  /** No `id` member: the call runs, and nothing is answered for it. */
  notification: boolean;
  method: string;
  params: unknown;
}

const validId = (id: unknown): id is Id => id === null || typeof id === 'string' || (typeof id === 'number' && Number.isFinite(id));

/** A call of the batch, or the error its shape earns (answered with its id when that is readable, else null). */
function callOf(item: unknown): Call | { id: Id; error: RpcError } {
  if (typeof item !== 'object' || item === null || Array.isArray(item)) {
    return {
      id: null,
      error: new RpcError('BAD_REQUEST', 'A JSON-RPC request must be an object: {"jsonrpc": "2.0", "method": "Group.operation", "params": {}, "id": 1}'),
    };
  }
  const { jsonrpc, method, params, id } = item as Record<string, unknown>;
  const hasId = Object.hasOwn(item, 'id');
  if (hasId && !validId(id)) return { id: null, error: new RpcError('BAD_REQUEST', '"id" must be a string, a number or null') };
  const answerId = hasId ? (id as Id) : null;
  if (jsonrpc !== '2.0') return { id: answerId, error: new RpcError('BAD_REQUEST', '"jsonrpc" must be exactly "2.0"') };
  if (typeof method !== 'string' || method === '') return { id: answerId, error: new RpcError('BAD_REQUEST', '"method" must be a non-empty string') };
  if (Array.isArray(params)) {
    return { id: answerId, error: validationError([{ path: 'params', message: 'params are taken by name: give an object, not an array' }]) };
  }
  if (params !== undefined && (typeof params !== 'object' || params === null)) {
    return { id: answerId, error: new RpcError('BAD_REQUEST', '"params" must be an object') };
  }
  return { id: answerId, notification: !hasId, method, params };
}

function errorMember(error: RpcError, requestId: string, errorId?: string) {
  return {
    code: jsonRpcCode(error.code, error.status),
    message: error.message,
    data: {
      code: error.code,
      ...(error.issues ? { issues: error.issues } : {}),
      ...(error.details ? { details: error.details } : {}),
      requestId,
      ...(errorId ? { errorId } : {}),
      ...(error.retryAfter !== undefined ? { retryAfter: error.retryAfter } : {}),
    },
  };
}

/** A JSON-RPC error answer (also the endpoint's, for a call whose answer could not be sent). */
export const errorAnswer = (id: Id, error: RpcError, requestId: string, errorId?: string) => ({
  jsonrpc: '2.0',
  id,
  error: errorMember(error, requestId, errorId),
});

function answerOf(id: Id, outcome: DispatchResult, requestId: string) {
  if (!outcome.ok) return errorAnswer(id, outcome.error, requestId, outcome.errorId);
  // An operation answering beside `data` in the spec's envelope ({success: true, message}) answers those fields as its result.
  const { result } = outcome;
  return { jsonrpc: '2.0', id, result: answerData(result) };
}

/** A body that is not JSON but was meant as JSON-RPC: 400 with JSON-RPC's parse error. */
export function answerParseError(res: ServerResponse, requestId: string): void {
  const error = { code: PARSE_ERROR, message: 'Request body is not valid JSON', data: { code: 'BAD_REQUEST', requestId } };
  send(res, 400, { jsonrpc: '2.0', id: null, error }, { requestId });
}

export interface JsonRpcExchange {
  endpoint: RpcEndpoint;
  req: IncomingMessage;
  res: ServerResponse;
  requestId: string;
  transport: HttpTransport;
}

/**
 * Answers a JSON-RPC body: one call, or a batch of at most
 * JSON_RPC_BATCH_LIMIT; 204 when every call was a notification. A single
 * call answered synchronously by the dispatcher creates no promise, as in
 * the spec's envelope (rpc-endpoint.ts).
 */
export function answerJsonRpc(exchange: JsonRpcExchange, body: unknown): void | Promise<void> {
  if (Array.isArray(body)) return answerBatch(exchange, body);
  const call = callOf(body);
  const { res, requestId, transport } = exchange;
  if ('error' in call) return send(res, 200, errorAnswer(call.id, call.error, requestId), { requestId });
  const started = performance.now();
  const outcome = dispatch(exchange, call, requestId);
  const finish = (settled: DispatchResult): void => {
    recordTracedCall(exchange.endpoint, requestId, call.method, settled, started);
    if (call.notification) return noContent(exchange);
    const retryAfter = settled.ok ? undefined : settled.error.retryAfter;
    send(res, 200, answerOf(call.id, settled, requestId), { requestId, cookies: transport.cookies, retryAfter });
  };
  if (outcome instanceof Promise) return outcome.then(finish);
  finish(outcome);
}

/** A call through the dispatcher, as the spec's envelope makes it; `rpc.discover` (OpenRPC's) answers the service's document. */
const dispatch = (exchange: JsonRpcExchange, call: Call, requestId: string): DispatchResult | Promise<DispatchResult> =>
  call.method === 'rpc.discover'
    ? discover(exchange, requestId)
    : exchange.endpoint.dispatcher.dispatch({
        method: call.method,
        params: call.params,
        requestId,
        credentials: presentedCredentials(exchange.req.headers),
        transport: exchange.transport,
        traceHeaders: exchange.req.headers,
      });

/**
 * The OpenRPC document, of what the caller may call when a credential comes
 * with the request (as GET /openrpc.json). Metered like an operation call: by
 * the credential's rate, or per address (DISCOVER_PER_MINUTE) without one.
 */
async function discover({ endpoint, req, transport }: JsonRpcExchange, requestId: string): Promise<DispatchResult> {
  const { pipeline, registry, openRpc, rateLimiter } = endpoint;
  const caller = await pipeline.callerOf(presentedCredentials(req.headers));
  const outcome = { method: 'rpc.discover', userId: caller?.userId ?? null };
  try {
    await (caller ? pipeline.meter(caller) : meterAnonymousDiscovery(rateLimiter, transport.clientIp));
  } catch (thrown) {
    return { ok: false, ...pipeline.failure(thrown, { requestId, method: 'rpc.discover' }), ...outcome };
  }
  const permits = caller ? (method: string) => pipeline.permits(registry.get(method)!, caller) : undefined;
  return { ok: true, result: openRpcFor(openRpc, transport.baseUrl, permits), ...outcome };
}

function noContent({ res, requestId, transport }: JsonRpcExchange): void {
  const headers: Record<string, string | string[]> = { 'x-request-id': requestId };
  if (transport.cookies.length > 0) headers['set-cookie'] = transport.cookies;
  res.writeHead(204, headers).end();
}

/**
 * A batch: its calls one after another, each answer serialised as it is made
 * and counted against the batch's AnswerBudget; `rpc.discover` is answered
 * once, as a second document would be the same one again.
 */
async function answerBatch(exchange: JsonRpcExchange, items: unknown[]): Promise<void> {
  const { endpoint, res, requestId, transport } = exchange;
  if (items.length > JSON_RPC_BATCH_LIMIT) {
    const error = new RpcError('BAD_REQUEST', `A batch of ${items.length} calls: at most ${JSON_RPC_BATCH_LIMIT} are taken`);
    return send(res, 200, errorAnswer(null, error, requestId), { requestId });
  }
  const budget = new AnswerBudget(endpoint.options);
  const answers: string[] = [];
  let discovered = false;
  let retryAfter: number | undefined;
  for (const [index, item] of items.entries()) {
    // Each call of a batch has its own id in the logs and its error data; the header carries the request's.
    const callId = `${requestId}.${index + 1}`;
    const call = callOf(item);
    if ('error' in call) {
      answers.push(JSON.stringify(errorAnswer(call.id, call.error, callId)));
      continue;
    }
    const refusal = budget.spent
      ? budget.refusal(false)
      : call.method === 'rpc.discover' && discovered
        ? new RpcError('BAD_REQUEST', 'rpc.discover is answered once per request: this batch asked for it before')
        : undefined;
    if (refusal) {
      if (!call.notification) answers.push(JSON.stringify(errorAnswer(call.id, refusal, callId)));
      continue;
    }
    discovered ||= call.method === 'rpc.discover';
    const started = performance.now();
    const outcome = await dispatch(exchange, call, callId);
    recordTracedCall(endpoint, callId, call.method, outcome, started);
    if (!outcome.ok && outcome.error.retryAfter !== undefined) retryAfter = Math.max(retryAfter ?? 0, outcome.error.retryAfter);
    if (call.notification) continue;
    const answer = JSON.stringify(answerOf(call.id, outcome, callId));
    answers.push(budget.take(Buffer.byteLength(answer)) ? answer : JSON.stringify(errorAnswer(call.id, budget.refusal(true), callId)));
  }
  if (answers.length === 0) return noContent(exchange);
  sendText(res, 200, `[${answers.join(',')}]`, { requestId, cookies: transport.cookies, retryAfter });
}
