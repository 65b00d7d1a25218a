import { RpcError, type Issue } from './errors.ts';
import { EventStream, type EventStreamOptions } from './events.ts';
import { ERROR_STATUS, GROUPS, type ErrorCode, type Groups, type Operations } from './operations.ts';
import type { CallOptions, ClientOptions } from './options.ts';

/** A file to upload: its bytes, its type (checked by the service against the bytes) and a display name. */
export interface UploadFile {
  content: Blob | Uint8Array | string;
  mimeType: string;
  fileName?: string;
}

/** A file the service stored: pass `fileId` to the operation that finalizes the upload. */
export interface UploadedFile {
  fileId: string;
  fileName: string;
  mimeType: string;
  size: number;
}

type Method = keyof Operations;
type ParamsOf<M extends Method> = Operations[M]['params'];
type ResultOf<M extends Method> = Operations[M]['result'];

export type Client = Groups & {
  /** Calls any operation by name: the typed methods (`client.MemoryRpc.listMemories`) are this. */
  call<M extends Method>(method: M, params?: ParamsOf<M>, options?: CallOptions): Promise<ResultOf<M>>;
  /** An operation the client was not generated with (a plugin installed beside the built-in ones): its answer untyped. */
  call(method: string, params?: Record<string, unknown>, options?: CallOptions): Promise<unknown>;
  /**
   * Sends files to an upload key's `uploadUrl` (from an operation such as
   * `UserProfileRpc.getUploadKeyForProfilePicture`), then finalize with that
   * group's operation.
   */
  upload(uploadUrl: string, files: UploadFile | UploadFile[], options?: CallOptions): Promise<UploadedFile[]>;
  /** Opens the event stream (`GET /ws`): the events of the caller's subscription that concern it, typed by name. */
  events(options?: EventStreamOptions): EventStream;
};

const DEFAULT_RETRIES = 3;
const DEFAULT_MAX_RETRY_DELAY_MS = 30_000;
/** The first wait when the service gives no Retry-After; doubled at each try. */
const BACKOFF_MS = 500;

interface Attempt {
  response?: Response;
  body?: unknown;
}

/**
 * A client of one service with one credential. Calls go as JSON-RPC 2.0 to
 * `POST /api/rpc`; the answer's `result` is the operation's declared result.
 */
export function createClient(options: ClientOptions): Client {
  const baseUrl = options.baseUrl.replace(/\/+$/, '');
  const doFetch = options.fetch ?? globalThis.fetch;
  const headers: Record<string, string> = {};
  if (options.apiKey) headers['x-api-key'] = options.apiKey;
  else if (options.token) headers.authorization = `Bearer ${options.token}`;
  let nextId = 0;

  /** Sends until the answer is not a 429 or 503 worth waiting for, or the tries run out. */
  async function send(url: string, init: () => RequestInit, callOptions: CallOptions | undefined, refusal: (attempt: Attempt) => RpcError | undefined) {
    const retries = callOptions?.retries ?? options.retries ?? DEFAULT_RETRIES;
    for (let attempt = 0; ; attempt++) {
      let response: Response;
      try {
        response = await doFetch(url, { ...init(), signal: callOptions?.signal });
      } catch (cause) {
        if (callOptions?.signal?.aborted) throw cause;
        throw new RpcError({ code: 'NETWORK_ERROR', message: `Could not reach ${url}: ${(cause as Error).message}`, cause });
      }
      const body = await response.json().catch(() => undefined);
      const error = refusal({ response, body });
      if (!error) return body;
      const wait = retryDelay(error, response, attempt);
      if (wait === undefined || attempt >= retries || wait > (options.maxRetryDelayMs ?? DEFAULT_MAX_RETRY_DELAY_MS)) throw error;
      await sleep(wait, callOptions?.signal);
    }
  }

  const call = async (method: string, params?: unknown, callOptions?: CallOptions): Promise<unknown> => {
    const id = ++nextId;
    const request = JSON.stringify({ jsonrpc: '2.0', id, method, params: params ?? {} });
    const answer = (await send(
      `${baseUrl}/api/rpc`,
      () => ({ method: 'POST', headers: { ...headers, 'content-type': 'application/json' }, body: request }),
      callOptions,
      jsonRpcRefusal,
    )) as { result: unknown };
    return answer.result;
  };

  const upload = async (uploadUrl: string, files: UploadFile | UploadFile[], callOptions?: CallOptions): Promise<UploadedFile[]> => {
    const list = Array.isArray(files) ? files : [files];
    // A FormData is consumed by the request that sends it: each try builds its own.
    const form = () => {
      const data = new FormData();
      list.forEach((file, index) =>
        data.append(`file${index}`, new Blob([file.content as BlobPart], { type: file.mimeType }), file.fileName ?? `file${index}`),
      );
      return data;
    };
    const answer = (await send(uploadUrl, () => ({ method: 'POST', headers, body: form() }), callOptions, envelopeRefusal)) as {
      data: { files: UploadedFile[] };
    };
    return answer.data.files;
  };

  const client = {
    call: call as Client['call'],
    upload,
    events: (streamOptions?: EventStreamOptions) => new EventStream({ baseUrl, apiKey: options.apiKey, token: options.token, ...streamOptions }),
  } as Client;
  for (const [group, names] of Object.entries(GROUPS)) {
    const methods: Record<string, unknown> = {};
    for (const name of names) methods[name] = (params?: unknown, callOptions?: CallOptions) => call(`${group}.${name}`, params, callOptions);
    (client as unknown as Record<string, unknown>)[group] = Object.freeze(methods);
  }
  return client;
}

const isObject = (value: unknown): value is Record<string, unknown> => typeof value === 'object' && value !== null && !Array.isArray(value);

/** The error a JSON-RPC answer carries, or one for an answer that is not JSON-RPC; undefined for a result. */
function jsonRpcRefusal({ response, body }: Attempt): RpcError | undefined {
  const requestId = response?.headers.get('x-request-id') ?? undefined;
  if (isObject(body) && 'result' in body) return undefined;
  if (isObject(body) && isObject(body.error)) {
    const data = isObject(body.error.data) ? body.error.data : {};
    const code = typeof data.code === 'string' ? (data.code as ErrorCode) : 'INTERNAL';
    return new RpcError({
      code,
      message: String(body.error.message),
      issues: data.issues as Issue[] | undefined,
      requestId: (data.requestId as string | undefined) ?? requestId,
      errorId: data.errorId as string | undefined,
      retryAfter: typeof data.retryAfter === 'number' ? data.retryAfter : retryAfterHeader(response),
      details: isObject(data.details) ? data.details : undefined,
      status: ERROR_STATUS[code as keyof typeof ERROR_STATUS] ?? response?.status,
    });
  }
  return unexpected(response);
}

/** The error of the spec's envelope `{success: false, data: {error, code, issues}}` (the upload routes answer in it). */
function envelopeRefusal({ response, body }: Attempt): RpcError | undefined {
  if (isObject(body) && body.success === true) return undefined;
  if (isObject(body) && isObject(body.data) && typeof body.data.code === 'string') {
    return new RpcError({
      code: body.data.code as ErrorCode,
      message: String(body.data.error),
      issues: body.data.issues as Issue[] | undefined,
      requestId: response?.headers.get('x-request-id') ?? undefined,
      errorId: body.data.errorId as string | undefined,
      retryAfter: retryAfterHeader(response),
      details: isObject(body.data.details) ? body.data.details : undefined,
      status: response?.status,
    });
  }
  return unexpected(response);
}

const unexpected = (response: Response | undefined): RpcError =>
  new RpcError({
    code: 'INVALID_RESPONSE',
    message: `The service answered HTTP ${response?.status} without an answer the client understands`,
    status: response?.status,
    retryAfter: retryAfterHeader(response),
    requestId: response?.headers.get('x-request-id') ?? undefined,
  });

function retryAfterHeader(response: Response | undefined): number | undefined {
  const value = response?.headers.get('retry-after');
  if (!value) return undefined;
  const seconds = Number(value);
  if (Number.isFinite(seconds)) return Math.max(0, seconds);
  const date = Date.parse(value);
  return Number.isNaN(date) ? undefined : Math.max(0, (date - Date.now()) / 1000);
}

/**
 * How long to wait before trying again, or undefined when trying again would
 * not help. A 429 or a 503 is retried (a 503 from the service itself only when
 * it says when: FEATURE_UNAVAILABLE without Retry-After is a setting, not a
 * moment); the wait is the service's Retry-After, else a doubling backoff.
 */
function retryDelay(error: RpcError, response: Response, attempt: number): number | undefined {
  const status = response.status === 429 || response.status === 503 ? response.status : error.status;
  if (status !== 429 && status !== 503) return undefined;
  if (error.retryAfter !== undefined) return error.retryAfter * 1000;
  if (status === 503 && response.status !== 503) return undefined;
  return BACKOFF_MS * 2 ** attempt * (0.5 + Math.random() / 2);
}

function sleep(ms: number, signal: AbortSignal | undefined): Promise<void> {
  return new Promise((resolve, reject) => {
    const timer = setTimeout(resolve, ms);
    signal?.addEventListener(
      'abort',
      () => {
        clearTimeout(timer);
        reject(signal.reason);
      },
      { once: true },
    );
  });
}
