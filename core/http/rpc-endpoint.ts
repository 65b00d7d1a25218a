import type { IncomingMessage, ServerResponse } from 'node:http';
import getRawBody from 'raw-body';
import { presentedCredentials } from '../auth/credentials.ts';
import type { Logger } from '../logger.ts';
import { errorBody, type Dispatcher } from '../rpc/dispatch.ts';
import { RpcError } from '../rpc/errors.ts';
import { Envelope } from '../rpc/operation.ts';
import type { Metrics } from './metrics.ts';
import { httpTransport, type TransportOptions } from './request-info.ts';

export interface RpcEndpointOptions extends TransportOptions {
  bodyLimitBytes: number;
}

const JSON_TYPE = /^application\/([a-z.+-]*\+)?json\b/i;

function send(res: ServerResponse, status: number, body: unknown, retryAfter?: number): void {
  const text = JSON.stringify(body);
  res.statusCode = status;
  res.setHeader('content-type', 'application/json; charset=utf-8');
  res.setHeader('content-length', Buffer.byteLength(text));
  res.setHeader('cache-control', 'no-store');
  if (retryAfter !== undefined) res.setHeader('retry-after', String(retryAfter));
  res.end(text);
}

function sendError(res: ServerResponse, error: RpcError, errorId?: string): void {
  send(res, error.status, { success: false, data: errorBody(error, errorId) }, error.retryAfter);
}

async function readEnvelope(req: IncomingMessage, limit: number): Promise<{ method: string; params: unknown }> {
  if (!JSON_TYPE.test(req.headers['content-type'] ?? '')) {
    throw new RpcError('BAD_REQUEST', 'Content-Type must be application/json');
  }
  let text: string;
  try {
    text = await getRawBody(req, { limit, length: req.headers['content-length'], encoding: 'utf8' });
  } catch (error) {
    if ((error as { type?: string }).type === 'entity.too.large') {
      throw new RpcError('PAYLOAD_TOO_LARGE', `Request body exceeds ${limit} bytes`);
    }
    throw new RpcError('BAD_REQUEST', 'Could not read the request body');
  }
  let body: unknown;
  try {
    body = JSON.parse(text);
  } catch {
    throw new RpcError('BAD_REQUEST', 'Request body is not valid JSON');
  }
  if (typeof body !== 'object' || body === null || Array.isArray(body)) {
    throw new RpcError('BAD_REQUEST', 'Request body must be a JSON object: {"method": "Group.operation", "params": {}}');
  }
  const { method, params } = body as { method?: unknown; params?: unknown };
  if (typeof method !== 'string' || method === '') {
    throw new RpcError('BAD_REQUEST', 'Request body has no "method" (a string like "Group.operation")');
  }
  if (params !== undefined && (typeof params !== 'object' || params === null || Array.isArray(params))) {
    throw new RpcError('BAD_REQUEST', '"params" must be a JSON object');
  }
  return { method, params };
}

/**
 * `POST /api/rpc` on plain node objects: the hot path of the service, kept
 * free of middleware chains. Everything else the server answers goes through Koa.
 */
export function createRpcEndpoint(dispatcher: Dispatcher, metrics: Metrics, logger: Logger, options: RpcEndpointOptions) {
  return async function handleRpc(req: IncomingMessage, res: ServerResponse, requestId: string): Promise<void> {
    const started = process.hrtime.bigint();
    let envelope: { method: string; params: unknown };
    try {
      envelope = await readEnvelope(req, options.bodyLimitBytes);
    } catch (error) {
      const rpcError = error as RpcError;
      metrics.rpcCalls.inc({ method: 'invalid', code: rpcError.code });
      logger.info({ requestId, code: rpcError.code }, rpcError.message);
      if (rpcError.code === 'PAYLOAD_TOO_LARGE') res.setHeader('connection', 'close');
      return sendError(res, rpcError);
    }
    const outcome = await dispatcher.dispatch({
      method: envelope.method,
      params: envelope.params,
      requestId,
      credentials: presentedCredentials(req.headers),
      transport: httpTransport(req, res, options),
    });
    if (outcome.ok) {
      const { result } = outcome;
      send(res, 200, result instanceof Envelope ? { success: true, ...result.fields } : { success: true, data: result ?? null });
    } else {
      sendError(res, outcome.error, outcome.errorId);
    }
    const code = outcome.ok ? 'OK' : outcome.error.code;
    const seconds = Number(process.hrtime.bigint() - started) / 1e9;
    metrics.rpcCalls.inc({ method: outcome.method, code });
    metrics.rpcDuration.observe({ method: outcome.method }, seconds);
    const line = { requestId, method: envelope.method, code, userId: outcome.userId, ms: Math.round(seconds * 1e4) / 10 };
    if (outcome.ok) logger.debug(line, 'rpc call');
    else if (outcome.error.status >= 500) logger.error(line, 'rpc call failed');
    else logger.info(line, 'rpc call refused');
  };
}
