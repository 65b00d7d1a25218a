import { randomUUID } from 'node:crypto';
import type { IncomingMessage, ServerResponse } from 'node:http';
import { presentedCredentials } from '../credentials/authenticator.ts';
import type { Logger } from '../logger.ts';
import { errorBody, type DispatchResult, type Dispatcher } from '../rpc/dispatch.ts';
import { RpcError } from '../rpc/errors.ts';
import { Envelope } from '../rpc/operation.ts';
import type { Metrics } from './metrics.ts';
import { answerDuringBody, readBody, type BodyReceiver } from './read-body.ts';
import { HttpTransport, type TransportOptions } from './request-info.ts';

export interface RpcEndpointOptions extends TransportOptions {
  bodyLimitBytes: number;
}

const JSON_TYPE = /^application\/([a-z.+-]*\+)?json\b/i;

interface Reply {
  requestId: string;
  cookies?: string[];
  retryAfter?: number;
  /** A body refused while it may still be arriving, and the limit it broke: the answer closes the connection once the rest is dropped. */
  refusedBody?: { req: IncomingMessage; limit: number };
}

/** One writeHead with every header: the cheapest way out for a small JSON answer. */
function send(res: ServerResponse, status: number, body: unknown, reply: Reply): void {
  const text = JSON.stringify(body);
  const headers: Record<string, string | number | string[]> = {
    'content-type': 'application/json; charset=utf-8',
    'content-length': Buffer.byteLength(text),
    'x-request-id': reply.requestId,
  };
  if (reply.cookies?.length) headers['set-cookie'] = reply.cookies;
  if (reply.retryAfter !== undefined) headers['retry-after'] = String(reply.retryAfter);
  if (reply.refusedBody) answerDuringBody(reply.refusedBody.req, res, status, headers, text, reply.refusedBody.limit);
  else res.writeHead(status, headers).end(text);
}

function sendError(res: ServerResponse, error: RpcError, reply: Reply, errorId?: string): void {
  send(res, error.status, { success: false, data: errorBody(error, errorId) }, { ...reply, retryAfter: error.retryAfter });
}

function parseEnvelope(text: string): { method: string; params: unknown } {
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

export interface RpcEndpoint {
  dispatcher: Dispatcher;
  metrics: Metrics;
  logger: Logger;
  options: RpcEndpointOptions;
}

/**
 * `POST /api/rpc` on plain node objects: the hot path of the service. It uses
 * a small object with methods and callbacks rather than closures and
 * promises, so a call answered from caches by a synchronous handler
 * allocates little. Everything else the server answers goes through Koa.
 */
export function createRpcEndpoint(endpoint: RpcEndpoint) {
  return (req: IncomingMessage, res: ServerResponse, requestId: string): void => new RpcCall(endpoint, req, res, requestId).start();
}

class RpcCall implements BodyReceiver {
  readonly #started = performance.now();
  #method = '';
  #transport?: HttpTransport;

  constructor(
    private readonly endpoint: RpcEndpoint,
    private readonly req: IncomingMessage,
    private readonly res: ServerResponse,
    private readonly requestId: string,
  ) {}

  start(): void {
    if (!JSON_TYPE.test(this.req.headers['content-type'] ?? '')) {
      return this.#refuse(new RpcError('BAD_REQUEST', 'Content-Type must be application/json'));
    }
    readBody(this.req, this.endpoint.options.bodyLimitBytes, this);
  }

  onBody(readError: RpcError | null, text: string): void {
    if (readError) return this.#refuse(readError);
    let envelope: { method: string; params: unknown };
    try {
      envelope = parseEnvelope(text);
    } catch (error) {
      return this.#refuse(error as RpcError);
    }
    this.#method = envelope.method;
    this.#transport = new HttpTransport(this.req, this.endpoint.options);
    const outcome = this.endpoint.dispatcher.dispatch({
      method: envelope.method,
      params: envelope.params,
      requestId: this.requestId,
      credentials: presentedCredentials(this.req.headers),
      transport: this.#transport,
    });
    if (outcome instanceof Promise) {
      // One then with both handlers: a .then().catch() chain costs a second promise and closure per call.
      outcome.then(
        (settled) => this.#settle(settled),
        (err) => this.#crashed(err),
      );
    } else {
      this.#settle(outcome);
    }
  }

  #settle(outcome: DispatchResult): void {
    try {
      this.finish(outcome);
    } catch (err) {
      this.#crashed(err);
    }
  }

  finish(outcome: DispatchResult): void {
    const reply: Reply = { requestId: this.requestId, cookies: this.#transport?.cookies };
    if (outcome.ok) {
      const { result } = outcome;
      send(this.res, 200, result instanceof Envelope ? { success: true, ...result.fields } : { success: true, data: result ?? null }, reply);
    } else {
      sendError(this.res, outcome.error, reply, outcome.errorId);
    }
    const { metrics, logger } = this.endpoint;
    const code = outcome.ok ? 'OK' : outcome.error.code;
    const seconds = (performance.now() - this.#started) / 1000;
    metrics.recordCall(outcome.method, code, seconds);
    if (outcome.ok && !logger.isLevelEnabled('debug')) return;
    const line = { requestId: this.requestId, method: this.#method, code, userId: outcome.userId, ms: Math.round(seconds * 1e4) / 10 };
    if (outcome.ok) logger.debug(line, 'rpc call');
    else if (outcome.error.status >= 500) logger.error(line, 'rpc call failed');
    else logger.info(line, 'rpc call refused');
  }

  #refuse(error: RpcError): void {
    this.endpoint.metrics.rpcCalls.inc({ method: 'invalid', code: error.code });
    this.endpoint.logger.info({ requestId: this.requestId, code: error.code }, error.message);
    const refusedBody = error.code === 'PAYLOAD_TOO_LARGE' ? { req: this.req, limit: this.endpoint.options.bodyLimitBytes } : undefined;
    sendError(this.res, error, { requestId: this.requestId, refusedBody });
  }

  /** A result that cannot be sent (say, not serialisable) still gets an answer and an error id. */
  #crashed(err: unknown): void {
    const errorId = randomUUID();
    this.endpoint.logger.error({ err, errorId, requestId: this.requestId }, 'rpc endpoint failed');
    if (!this.res.headersSent) {
      sendError(this.res, new RpcError('INTERNAL', `Internal error (error id ${errorId})`), { requestId: this.requestId }, errorId);
    }
  }
}
