import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Logger } from '../logger.ts';
import type { DispatchResult, Dispatcher } from '../rpc/dispatch.ts';
import type { OpenRpcDocument } from '../rpc/openrpc.ts';
import type { RequestPipeline } from '../rpc/pipeline.ts';
import type { Registry } from '../rpc/registry.ts';
import type { Metrics } from './metrics.ts';
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
  options: RpcEndpointOptions;
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
