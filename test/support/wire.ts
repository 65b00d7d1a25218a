import assert from 'node:assert/strict';
import type { Issue } from '../../clients/typescript/src/errors.ts';
import type { EventMessage, StreamReady } from '../../clients/typescript/src/events.ts';
import type { ErrorCode, Operations } from '../../clients/typescript/src/operations.ts';

/**
 * The JSON the service sends, as tests read it off the wire: the spec's
 * envelope, JSON-RPC 2.0 answers, WebSocket messages and log lines. What a test parses is
 * cast to these; the test's assertions are what check it.
 */

/** An operation's declared result, by its name: unknown for one the generated client does not know (a test plugin's). */
export type ResultOf<M extends string> = M extends keyof Operations ? Operations[M]['result'] : unknown;

/** A refusal in the spec's envelope: the `data` of `{success: false, data}` (the core's ErrorBody). */
export interface WireError {
  error: string;
  code: ErrorCode;
  issues?: Issue[];
  /** With INTERNAL: the id of the logged fault. */
  errorId?: string;
}

/** An answer in the spec's envelope: `{success: true, data}` (some operations answer a `message` beside it), or a refusal. */
export type Envelope<T = unknown> = { success: true; data: T; message?: string } | { success: false; data: WireError };

/** The data of an answer in the spec's envelope, insisting it succeeded. */
export function dataOf<T>(body: Envelope<T>): T {
  if (!body.success) assert.fail(`refused: ${JSON.stringify(body)}`);
  return body.data;
}

/** The refusal of an answer in the spec's envelope, insisting it was refused. */
export function refusalOf(body: Envelope<unknown>): WireError {
  if (body.success) assert.fail(`answered: ${JSON.stringify(body)}`);
  return body.data;
}

/** The `data` of a JSON-RPC error at /api/rpc: the service's code beside the number, and what it knows of the call. */
export interface JsonRpcErrorData {
  code: ErrorCode;
  issues?: Issue[];
  /** The request's id, `<id>.<n>` for the n-th call of a batch. */
  requestId: string;
  errorId?: string;
  /** Seconds to wait, with RATE_LIMITED. */
  retryAfter?: number;
}

/** A JSON-RPC 2.0 error; `D` is what its `data` holds (the MCP door's is its own). */
export interface JsonRpcError<D = JsonRpcErrorData> {
  code: number;
  message: string;
  data: D;
}

/** A JSON-RPC 2.0 answer: a `result` (`R`), or an `error`. */
export interface JsonRpcAnswer<R = unknown, D = JsonRpcErrorData> {
  jsonrpc: '2.0';
  id: string | number | null;
  result?: R;
  error?: JsonRpcError<D>;
}

/** A parsed body as one JSON-RPC answer (a single call's), insisting it is one object. */
export function jsonRpcAnswer<D = JsonRpcErrorData>(json: unknown): JsonRpcAnswer<unknown, D> {
  if (typeof json !== 'object' || json === null || Array.isArray(json)) assert.fail(`one JSON-RPC answer, not ${JSON.stringify(json)}`);
  return json as JsonRpcAnswer<unknown, D>;
}

/** A parsed body as the answers of a batch, insisting it is an array. */
export function jsonRpcAnswers<D = JsonRpcErrorData>(json: unknown): JsonRpcAnswer<unknown, D>[] {
  if (!Array.isArray(json)) assert.fail(`a batch's answers, not ${JSON.stringify(json)}`);
  return json as JsonRpcAnswer<unknown, D>[];
}

/** The error of an answer, which must hold one. */
export function errorOf<D>(answer: JsonRpcAnswer<unknown, D> | undefined): JsonRpcError<D> {
  if (!answer?.error) assert.fail(`an error, not ${JSON.stringify(answer)}`);
  return answer.error;
}

/** The result of an answer, which must hold one: `R` as the operation declares it. */
export function resultOf<R>(answer: JsonRpcAnswer<unknown, unknown> | undefined): R {
  if (!answer || !('result' in answer)) assert.fail(`a result, not ${JSON.stringify(answer)}`);
  return answer.result as R;
}

/** What the service sends on /ws: `ready` once it accepted the socket, `pong` to a ping, and the events that concern the client. */
export type WsMessage = ({ type: 'ready' } & StreamReady) | { type: 'pong' } | ({ type: 'event' } & EventMessage);

/** An error in a log line, as the logger writes it: what it says of itself, its cause, and the names of the objects it carries. */
export interface LoggedError {
  type: string;
  message: string;
  stack: string;
  cause?: LoggedError;
  [field: string]: unknown;
}

/** A line of the service's JSON log: its message, the fields of the request or job it is about, and an error. */
export interface LogLine {
  level: number;
  msg: string;
  requestId?: string;
  method?: string;
  errorId?: string;
  err?: LoggedError;
  [field: string]: unknown;
}

/** The lines of a log, parsed. */
export const logLines = (lines: readonly string[]): LogLine[] => lines.map((line) => JSON.parse(line) as LogLine);
