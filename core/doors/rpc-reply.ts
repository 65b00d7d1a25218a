import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Logger } from '../base/logger.ts';
import type { RateLimiter } from '../rate-limits/rate-limiter.ts';
import type { DispatchResult, Dispatcher } from '../rpc/dispatch.ts';
import { RpcError } from '../base/errors.ts';
import type { OpenRpcDocument } from '../rpc/openrpc.ts';
import type { RequestPipeline } from '../rpc/pipeline.ts';
import type { Registry } from '../rpc/registry.ts';
import type { Metrics } from '../base/metrics.ts';
import { answerDuringBody } from './read-body.ts';
import type { TransportOptions } from './request-info.ts';

/** What `POST /api/rpc` answers with, in either envelope (rpc-endpoint.ts, json-rpc.ts). */
export interface RpcEndpointOptions extends TransportOptions {
  bodyLimitBytes: number;
}

export interface RpcEndpoint {
  dispatcher: Dispatcher;
  /** What JSON-RPC's `rpc.discover` answers (with the caller's server address, and only what the caller may call). */
  openRpc: OpenRpcDocument;
  pipeline: RequestPipeline;
  registry: Registry;
  metrics: Metrics;
  logger: Logger;
  /** Counts what is metered outside an operation call: the discovery of a caller without a credential, per address. */
  rateLimiter: RateLimiter;
  options: RpcEndpointOptions;
}

/**
 * How many times the largest body taken the answers of one batch may add up
 * to (JSON-RPC's at /api/rpc, MCP's at /mcp). A few kilobytes of calls that
 * each answer a large document would otherwise make an answer thousands of
 * times the request, built whole in memory before a byte is sent.
 */
export const BATCH_ANSWER_FACTOR = 8;

/**
 * The bytes the answers of one batch may still take. Each answer is counted
 * as it is made; once one would go past the limit, it and every later call of
 * the batch are answered with `refusal` instead, and the later ones are not run.
 */
export class AnswerBudget {
  readonly limit: number;
  #left: number;

  constructor(options: RpcEndpointOptions) {
    this.limit = BATCH_ANSWER_FACTOR * options.bodyLimitBytes;
    this.#left = this.limit;
  }

  get spent(): boolean {
    return this.#left < 0;
  }

  /** Counts an answer of `bytes`; false (and the budget spent) when it does not fit. */
  take(bytes: number): boolean {
    this.#left -= bytes;
    return this.#left >= 0;
  }

  /** The error a call gets once the budget is spent: `ran` for the one whose answer did not fit, which ran before its size was known. */
  refusal(ran: boolean): RpcError {
    const what = ran ? 'this call ran, but its answer is left out' : 'this call was not run';
    return new RpcError('PAYLOAD_TOO_LARGE', `The answers of this batch would exceed ${this.limit} bytes: ${what}; send fewer calls per batch`);
  }
}

export interface Reply {
  requestId: string;
  cookies?: string[];
  retryAfter?: number;
  /** A body refused while it may still be arriving, and the limit it broke: the answer closes the connection once the rest is dropped. */
  refusedBody?: { req: IncomingMessage; limit: number };
}

/** One writeHead with every header: the cheapest way out for a small JSON answer. */
export function send(res: ServerResponse, status: number, body: unknown, reply: Reply): void {
  sendText(res, status, JSON.stringify(body), reply);
}

/** `send` of an answer already serialised (a batch's, made of its answers' texts). */
export function sendText(res: ServerResponse, status: number, text: string, reply: Reply): void {
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

/** The metrics and the log line of one operation call, whichever envelope carried it. */
export function recordCall(endpoint: RpcEndpoint, requestId: string, method: string, outcome: DispatchResult, started: number): void {
  const { metrics, logger } = endpoint;
  const code = outcome.ok ? 'OK' : outcome.error.code;
  const seconds = (performance.now() - started) / 1000;
  metrics.recordCall(outcome.method, code, seconds);
  if (outcome.ok && !logger.isLevelEnabled('debug')) return;
  const line = { requestId, method, code, userId: outcome.userId, ms: Math.round(seconds * 1e4) / 10 };
  if (outcome.ok) logger.debug(line, 'rpc call');
  else if (outcome.error.status >= 500) logger.error(line, 'rpc call failed');
  else logger.info(line, 'rpc call refused');
}
