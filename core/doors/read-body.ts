import type { IncomingMessage, OutgoingHttpHeaders, ServerResponse } from 'node:http';
import { RpcError } from '../base/errors.ts';

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
 * refused before any byte is read. What is left of a refused body is not
 * read here: answer it with `answerDuringBody`.
 */
export function readBody(req: IncomingMessage, limit: number, receiver: BodyReceiver): void {
  const header = req.headers['content-length'];
  const declared = header === undefined ? -1 : Number(header);
  if (declared > limit) return tooLarge(limit, receiver);
  (req as Reading)[STATE] = { chunks: [], size: 0, limit, declared, receiver };
  req.on('data', onData);
  req.on('end', onEnd);
  req.on('error', onError);
}

function tooLarge(limit: number, receiver: BodyReceiver): void {
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
    return tooLarge(state.limit, state.receiver);
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

/** How much of a refused body is read and dropped, as a multiple of the limit it broke, before the connection is cut. */
const DISCARD_FACTOR = 4;
/** How long a refused body may keep arriving before the connection is cut. */
const DISCARD_MS = 30_000;

/**
 * Answers a request whose body may still be arriving (a refusal) so that the
 * client gets the answer rather than a reset: the answer goes out whole at
 * once with `Connection: close`, and the connection closes only once the rest
 * of the body has been read and dropped. Closing with unread bytes makes the
 * kernel reset the connection, and a client still writing its body then sees
 * EPIPE or ECONNRESET instead of the answer. A client that sends more than
 * DISCARD_FACTOR times `limit` after the refusal, or for longer than
 * DISCARD_MS, is cut off.
 */
export function answerDuringBody(req: IncomingMessage, res: ServerResponse, status: number, headers: OutgoingHttpHeaders, text: string, limit: number): void {
  res.writeHead(status, { ...headers, 'content-length': Buffer.byteLength(text), connection: 'close' });
  if (req.complete || req.destroyed) return void res.end(text);
  // Written but not ended: ending is what makes the server close the connection.
  res.write(text);
  let left = DISCARD_FACTOR * limit;
  const done = (): void => {
    clearTimeout(timer);
    req.off('data', drop).off('end', done).off('close', done);
    res.end();
  };
  const cut = (): void => {
    done();
    req.socket.destroy();
  };
  const drop = (chunk: Buffer): void => {
    left -= chunk.length;
    if (left < 0) cut();
  };
  const timer = setTimeout(cut, DISCARD_MS);
  req.on('data', drop).once('end', done).once('close', done);
  req.resume();
}
