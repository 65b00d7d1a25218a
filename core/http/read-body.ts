import type { IncomingMessage } from 'node:http';
import { RpcError } from '../rpc/errors.ts';

/** Told once, when the whole body is read or reading failed. */
export interface BodyReceiver {
  onBody(error: RpcError | null, text: string): void;
}

interface ReadState {
  chunks: Buffer[];
  size: number;
  limit: number;
  declared: number;
  receiver: BodyReceiver;
}

const STATE = Symbol('bodyRead');
type Reading = IncomingMessage & { [STATE]?: ReadState };

/**
 * Reads a request body of at most `limit` bytes as UTF-8. Written for the RPC
 * hot path: the listeners are shared module functions (no closures or
 * promises per request), and a declared Content-Length over the limit is
 * refused before any byte is read.
 */
export function readBody(req: IncomingMessage, limit: number, receiver: BodyReceiver): void {
  const header = req.headers['content-length'];
  const declared = header === undefined ? -1 : Number(header);
  if (declared > limit) return tooLarge(req, limit, receiver);
  (req as Reading)[STATE] = { chunks: [], size: 0, limit, declared, receiver };
  req.on('data', onData);
  req.on('end', onEnd);
  req.on('error', onError);
}

function tooLarge(req: IncomingMessage, limit: number, receiver: BodyReceiver): void {
  req.resume();
  receiver.onBody(new RpcError('PAYLOAD_TOO_LARGE', `Request body exceeds ${limit} bytes`), '');
}

/** Detaches the reader; returns its state unless it had already finished. */
function finish(req: Reading): ReadState | undefined {
  const state = req[STATE];
  req[STATE] = undefined;
  req.off('data', onData);
  req.off('end', onEnd);
  return state;
}

function onData(this: Reading, chunk: Buffer): void {
  const state = this[STATE];
  if (!state) return;
  state.size += chunk.length;
  if (state.size > state.limit) {
    finish(this);
    return tooLarge(this, state.limit, state.receiver);
  }
  state.chunks.push(chunk);
}

function onEnd(this: Reading): void {
  const state = finish(this);
  if (!state) return;
  if (state.declared >= 0 && state.size !== state.declared) {
    return state.receiver.onBody(new RpcError('BAD_REQUEST', 'Request body is shorter than its Content-Length'), '');
  }
  const { chunks } = state;
  state.receiver.onBody(null, chunks.length === 1 ? chunks[0]!.toString('utf8') : Buffer.concat(chunks).toString('utf8'));
}

function onError(this: Reading): void {
  finish(this)?.receiver.onBody(new RpcError('BAD_REQUEST', 'Could not read the request body'), '');
}
