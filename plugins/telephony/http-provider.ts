import * as v from 'valibot';
import { OutboundRefusedError, RpcError, validationError, type AuthenticatedContext, type Outbound } from 'rpc-service/plugin';
import type { AssigneeKind } from './assignment.entity.ts';
import { EXTENSION, MAX_POOL_SIZE } from './config.ts';
import type { Assignee, TelephonyProvider } from './provider.ts';

type PlatformResponse = Awaited<ReturnType<Outbound['fetch']>>;

/** The largest answer read from the platform; a list of MAX_POOL_SIZE extensions is well under it. */
const MAX_ANSWER_BYTES = 1024 * 1024;
/** A platform's error message longer than this is not passed on to the caller. */
const MAX_PLATFORM_MESSAGE = 200;

const extensionList = v.object({
  extensions: v.pipe(v.array(v.pipe(v.string(), v.regex(EXTENSION))), v.maxLength(MAX_POOL_SIZE)),
});

/** What a call expects of the platform besides success: what its 404 means to the caller. */
interface Call {
  method: 'GET' | 'POST' | 'DELETE';
  path: string;
  body?: Record<string, unknown>;
  notFound: string;
}

/**
 * An external telephony platform behind a small REST API (see README.md):
 * the credential as a bearer token and the subscription in `X-Tenant-Id` on
 * every request, sent through the outbound guard with a timeout and no
 * redirects (a redirect would carry the credential elsewhere). The
 * platform's answers are checked, and its failures become the caller's
 * codes: 404 NOT_FOUND, 409 CONFLICT, 400 and 422 VALIDATION_ERROR, anything
 * else (a refused credential, 5xx, no answer, an unreadable one) UPSTREAM_ERROR.
 */
export class HttpProvider implements TelephonyProvider {
  readonly #outbound: Outbound;
  readonly #apiUrl: string;
  readonly #apiKey: string;
  readonly #timeoutMs: number;

  constructor(outbound: Outbound, settings: { apiUrl: string; apiKey: string; timeoutMs: number }) {
    this.#outbound = outbound;
    this.#apiUrl = settings.apiUrl;
    this.#apiKey = settings.apiKey;
    this.#timeoutMs = settings.timeoutMs;
  }

  availableExtensions(ctx: AuthenticatedContext): Promise<string[]> {
    return this.#list(ctx, { method: 'GET', path: '/extensions/available', notFound: 'The telephony platform has no extensions for this subscription' });
  }

  async assign(ctx: AuthenticatedContext, extension: string, assignee: Assignee): Promise<void> {
    const body =
      assignee.kind === 'user'
        ? { type: 'user', userId: assignee.userId, contactId: assignee.partnerContactId }
        : { type: 'agent', agentConfigId: assignee.agentConfigId, agentContactId: assignee.agentContactId };
    await this.#send(ctx, {
      method: 'POST',
      path: `/extensions/${extension}/assignment`,
      body,
      notFound: `Extension ${extension} does not exist on the telephony platform`,
    });
  }

  async disassociate(ctx: AuthenticatedContext, extension: string, kind: AssigneeKind): Promise<void> {
    await this.#send(ctx, {
      method: 'DELETE',
      path: `/extensions/${extension}/assignment?type=${kind}`,
      notFound: `Extension ${extension} is not assigned to ${kind === 'user' ? 'a user' : 'an agent'}`,
    });
  }

  extensionsOfUser(ctx: AuthenticatedContext, userId: string): Promise<string[]> {
    return this.#list(ctx, { method: 'GET', path: `/extensions?userId=${userId}`, notFound: `User ${userId} is not known to the telephony platform` });
  }

  extensionsOfAgent(ctx: AuthenticatedContext, agentContactId: string): Promise<string[]> {
    return this.#list(ctx, {
      method: 'GET',
      // In the query, not the path: an id such as `..` would move a path segment elsewhere on the platform.
      path: `/extensions?agentContactId=${encodeURIComponent(agentContactId)}`,
      notFound: `Agent ${agentContactId} is not known to the telephony platform`,
    });
  }

  async #list(ctx: AuthenticatedContext, call: Call): Promise<string[]> {
    const text = await this.#send(ctx, call);
    let answer: unknown;
    try {
      answer = JSON.parse(text);
    } catch {
      throw unreadable(ctx, call, 'not JSON');
    }
    const parsed = v.safeParse(extensionList, answer);
    // Where the answer went wrong, not what it held.
    if (!parsed.success) throw unreadable(ctx, call, `unexpected value at ${parsed.issues.map((issue) => v.getDotPath(issue) ?? '(the answer)').join(', ')}`);
    return parsed.output.extensions;
  }

  /** Sends one request; answers the text of a 2xx answer, throws the caller's error for anything else. */
  async #send(ctx: AuthenticatedContext, call: Call): Promise<string> {
    let response: PlatformResponse;
    let text: string | null;
    try {
      response = await this.#outbound.fetch(`${this.#apiUrl}${call.path}`, {
        method: call.method,
        headers: {
          authorization: `Bearer ${this.#apiKey}`,
          'x-tenant-id': ctx.subscriptionId,
          'x-request-id': ctx.requestId,
          accept: 'application/json',
          ...(call.body ? { 'content-type': 'application/json' } : {}),
        },
        body: call.body ? JSON.stringify(call.body) : undefined,
        maxRedirects: 0,
        signal: AbortSignal.timeout(this.#timeoutMs),
      });
      text = await readBounded(response);
    } catch (error) {
      throw this.#unreachable(ctx, call, error as Error);
    }
    if (text === null) throw unreadable(ctx, call, `larger than ${MAX_ANSWER_BYTES} bytes`);
    if (response.ok) return text;
    throw platformError(ctx, call, response.status, text);
  }

  #unreachable(ctx: AuthenticatedContext, call: Call, error: Error): RpcError {
    if (error instanceof OutboundRefusedError) {
      ctx.log.warn({ method: call.method, path: call.path, reason: error.message }, 'telephony platform refused by the outbound guard');
      return new RpcError(
        'FEATURE_UNAVAILABLE',
        'Telephony is not usable: the outbound guard refuses the address of TELEPHONY_API_URL; the operator allows it with OUTBOUND_ALLOWED_HOSTS',
      );
    }
    const cause = (error.cause as Error | undefined)?.message;
    ctx.log.warn({ method: call.method, path: call.path, reason: cause ? `${error.message}: ${cause}` : error.message }, 'telephony platform not reached');
    return new RpcError(
      'UPSTREAM_ERROR',
      error.name === 'TimeoutError' ? `The telephony platform did not answer within ${this.#timeoutMs} ms` : 'The telephony platform could not be reached',
    );
  }
}

/** The body of an answer, or null past MAX_ANSWER_BYTES (read no further: the platform is not trusted with this process's memory). */
async function readBounded(response: PlatformResponse): Promise<string | null> {
  if (!response.body) return '';
  const chunks: Uint8Array[] = [];
  let size = 0;
  for await (const chunk of response.body) {
    size += chunk.byteLength;
    if (size > MAX_ANSWER_BYTES) {
      await response.body.cancel().catch(() => undefined);
      return null;
    }
    chunks.push(chunk);
  }
  return Buffer.concat(chunks).toString('utf8');
}

function unreadable(ctx: AuthenticatedContext, call: Call, reason: string): RpcError {
  ctx.log.warn({ method: call.method, path: call.path, reason }, 'telephony platform answer unreadable');
  return new RpcError('UPSTREAM_ERROR', 'The telephony platform gave an answer this service cannot read');
}

/** The platform's `{error}` (or `{message}`) when it is a short line of text, fit to pass on. */
function platformMessage(text: string): string | undefined {
  let body: unknown;
  try {
    body = JSON.parse(text);
  } catch {
    return undefined;
  }
  const record = typeof body === 'object' && body !== null ? (body as Record<string, unknown>) : {};
  const message = typeof record.error === 'string' ? record.error : record.message;
  return typeof message === 'string' && message.trim() && message.length <= MAX_PLATFORM_MESSAGE && !/[\p{Cc}]/u.test(message) ? message.trim() : undefined;
}

function platformError(ctx: AuthenticatedContext, call: Call, status: number, text: string): RpcError {
  const message = platformMessage(text);
  switch (status) {
    case 404:
      return new RpcError('NOT_FOUND', message ?? call.notFound);
    case 409:
      return new RpcError('CONFLICT', message ?? 'The telephony platform refused the change: it conflicts with an existing assignment');
    case 400:
    case 422:
      return validationError([{ path: '', message: `the telephony platform refused it: ${message ?? `HTTP ${status}`}` }]);
  }
  ctx.log.warn({ method: call.method, path: call.path, status }, 'telephony platform request failed');
  if (status === 401 || status === 403) {
    return new RpcError('UPSTREAM_ERROR', `The telephony platform refused the service's credential (HTTP ${status}); the operator checks TELEPHONY_API_KEY`);
  }
  if (status >= 300 && status < 400) {
    return new RpcError(
      'UPSTREAM_ERROR',
      `The telephony platform answered with a redirect (HTTP ${status}), which is not followed; the operator checks TELEPHONY_API_URL`,
    );
  }
  return new RpcError('UPSTREAM_ERROR', `The telephony platform failed (HTTP ${status})`);
}
