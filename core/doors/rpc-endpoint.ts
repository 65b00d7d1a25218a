import { randomUUID } from 'node:crypto';
import type { IncomingMessage, ServerResponse } from 'node:http';
import { presentedCredentials } from '../credentials/authenticator.ts';
import { errorBody, type DispatchResult } from '../rpc/dispatch.ts';
import { RpcError } from '../base/errors.ts';
import { Envelope } from '../rpc/operation.ts';
import { answerJsonRpc, answerParseError, errorAnswer, isJsonRpc, looksLikeJsonRpc, recordTracedCall } from './json-rpc.ts';
import { readBody, type BodyReceiver } from './read-body.ts';
import { HttpTransport } from './request-info.ts';
import { send, type Reply, type RpcEndpoint } from './rpc-reply.ts';

const JSON_TYPE = /^application\/([a-z.+-]*\+)?json\b/i;

function sendError(res: ServerResponse, error: RpcError, reply: Reply, errorId?: string): void {
  send(res, error.status, { success: false, data: errorBody(error, errorId) }, { ...reply, retryAfter: error.retryAfter });
}

function envelopeOf(body: unknown): { method: string; params: unknown } {
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
  #jsonRpc = false;

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
    let body: unknown;
    try {
      body = JSON.parse(text);
    } catch {
      if (looksLikeJsonRpc(text)) return answerParseError(this.res, this.requestId);
      return this.#refuse(new RpcError('BAD_REQUEST', 'Request body is not valid JSON'));
    }
    this.#transport = new HttpTransport(this.req, this.endpoint.options);
    if (isJsonRpc(body)) {
      this.#jsonRpc = true;
      const exchange = { endpoint: this.endpoint, req: this.req, res: this.res, requestId: this.requestId, transport: this.#transport };
      try {
        const answered = answerJsonRpc(exchange, body);
        if (answered instanceof Promise) answered.catch((err) => this.#crashed(err));
      } catch (err) {
        this.#crashed(err);
      }
      return;
    }
    let envelope: { method: string; params: unknown };
    try {
      envelope = envelopeOf(body);
    } catch (error) {
      return this.#refuse(error as RpcError);
    }
    this.#method = envelope.method;
    const outcome = this.endpoint.dispatcher.dispatch({
      method: envelope.method,
      params: envelope.params,
      requestId: this.requestId,
      credentials: presentedCredentials(this.req.headers),
      transport: this.#transport,
      traceHeaders: this.req.headers,
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
    recordTracedCall(this.endpoint, this.requestId, this.#method, outcome, this.#started);
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
    if (this.res.headersSent) return;
    const error = new RpcError('INTERNAL', `Internal error (error id ${errorId})`);
    if (this.#jsonRpc) send(this.res, 200, errorAnswer(null, error, this.requestId, errorId), { requestId: this.requestId });
    else sendError(this.res, error, { requestId: this.requestId }, errorId);
  }
}
