import { randomUUID } from 'node:crypto';
import type { IncomingMessage } from 'node:http';
import type { Middleware } from 'koa';
import type { Logger } from '../base/logger.ts';
import type { Access, CookieOptions, Transport } from '../rpc/operation.ts';
import type { RequestPipeline } from '../rpc/pipeline.ts';
import { pipelineRoute, type RouteHandler, type RouteOptions } from './route.ts';
import { readBody } from './read-body.ts';

const REQUEST_ID = /^[A-Za-z0-9._:-]{1,128}$/;

/** Keeps a well-formed X-Request-Id from the caller (or proxy), else makes one. */
export function requestIdOf(req: IncomingMessage): string {
  const given = req.headers['x-request-id'];
  return typeof given === 'string' && REQUEST_ID.test(given) ? given : randomUUID();
}

export interface TransportOptions {
  trustProxy: boolean;
  publicUrl?: string;
}

const firstForwarded = (value: string | string[] | undefined): string | undefined =>
  (Array.isArray(value) ? value[0] : value)?.split(',')[0]?.trim() || undefined;

export function clientIpOf(req: IncomingMessage, trustProxy: boolean): string {
  const forwarded = trustProxy ? firstForwarded(req.headers['x-forwarded-for']) : undefined;
  return forwarded ?? req.socket.remoteAddress ?? 'unknown';
}

/**
 * While TRUST_PROXY is off, looks for the mark of a proxy in front: a request
 * carrying X-Forwarded-For, from whatever peer (a proxy of the same network, or
 * a CDN's public address). Every client then has the proxy's address and
 * shares its per-address limits (failed logins, signups, code requests) with
 * all the others; one warning says so, the first time only.
 */
export function untrustedProxyCheck(trustProxy: boolean, logger: Logger): (req: IncomingMessage) => void {
  let pending = !trustProxy;
  return (req) => {
    if (!pending || req.headers['x-forwarded-for'] === undefined) return;
    pending = false;
    logger.warn(
      { proxyAddress: req.socket.remoteAddress },
      'Requests arrive through a proxy (they carry X-Forwarded-For) while TRUST_PROXY is off: every client counts as the ' +
        "proxy's address, so one client's failed logins or signups hold back all; set TRUST_PROXY=true if the proxy is yours",
    );
  };
}

export function baseUrlOf(req: IncomingMessage, options: TransportOptions): string {
  if (options.publicUrl) return options.publicUrl;
  const proto = (options.trustProxy && firstForwarded(req.headers['x-forwarded-proto'])) || 'http';
  const host = (options.trustProxy && firstForwarded(req.headers['x-forwarded-host'])) || req.headers.host || 'localhost';
  return `${proto}://${host}`;
}

export function serializeCookie(name: string, value: string, secure: boolean, options: CookieOptions = {}): string {
  const parts = [`${name}=${encodeURIComponent(value)}`, 'Path=/', 'HttpOnly', 'SameSite=Lax'];
  if (options.maxAge !== undefined) parts.push(`Max-Age=${options.maxAge}`);
  if (options.expires) parts.push(`Expires=${options.expires.toUTCString()}`);
  if (secure) parts.push('Secure');
  return parts.join('; ');
}

/**
 * The Transport a handler sees for one HTTP request. Cookies it sets are
 * collected and go out with the response; the rest is computed on first use.
 */
export class HttpTransport implements Transport {
  readonly cookies: string[] = [];
  #clientIp?: string;
  #baseUrl?: string;

  constructor(
    private readonly req: IncomingMessage,
    private readonly options: TransportOptions,
  ) {}

  get clientIp(): string {
    return (this.#clientIp ??= clientIpOf(this.req, this.options.trustProxy));
  }

  get baseUrl(): string {
    return (this.#baseUrl ??= baseUrlOf(this.req, this.options));
  }

  get userAgent(): string | null {
    return this.req.headers['user-agent']?.slice(0, 300) || null;
  }

  setCookie(name: string, value: string, options?: CookieOptions): void {
    this.cookies.push(serializeCookie(name, value, this.baseUrl.startsWith('https:'), options));
  }
}

/** What plugin routes need: the request pipeline operations run through, and answering a browser the way the RPC endpoint would. */
export class HttpHelpers {
  #pipeline?: { pipeline: RequestPipeline; logger: Logger };

  constructor(private readonly options: TransportOptions) {}

  /** Called once the request pipeline exists (core/app/app.ts), before plugins make their routes. */
  bind(pipeline: RequestPipeline, logger: Logger): void {
    this.#pipeline = { pipeline, logger };
  }

  /**
   * A route handler that runs as operations run (core/doors/route.ts): the
   * caller authenticated and admitted by `access`, a request context, errors
   * answered with the codes RPC calls get.
   *
   *   router.get('/notes/:id/export', http.route({ access: 'user', serves: 'NoteRpc', kind: 'read' }, async ({ ctx, http }) => { ... }));
   */
  route<A extends Access>(options: RouteOptions<A>, handler: RouteHandler<A>): Middleware {
    if (!this.#pipeline) throw new Error("Routes are made once the request pipeline exists (in a plugin's routes hook)");
    return pipelineRoute(this.#pipeline, options, handler);
  }

  /** PUBLIC_URL without a trailing slash, when set. */
  get publicUrl(): string | undefined {
    return this.options.publicUrl;
  }

  /** The base URL the caller used (PUBLIC_URL when set). */
  baseUrl(req: IncomingMessage): string {
    return baseUrlOf(req, this.options);
  }

  /** The caller's address (X-Forwarded-For's first with TRUST_PROXY), for limits per address. */
  clientIp(req: IncomingMessage): string {
    return clientIpOf(req, this.options.trustProxy);
  }

  /** A small request body as text; PAYLOAD_TOO_LARGE past `limitBytes` (a route's form or JSON, which Koa does not read). */
  readText(req: IncomingMessage, limitBytes: number): Promise<string> {
    return new Promise((resolve, reject) => readBody(req, limitBytes, { onBody: (error, text) => (error ? reject(error) : resolve(text)) }));
  }

  /** A Set-Cookie value (HttpOnly, SameSite=Lax, Secure when the base URL is https). */
  cookie(req: IncomingMessage, name: string, value: string, options?: CookieOptions): string {
    return serializeCookie(name, value, this.baseUrl(req).startsWith('https:'), options);
  }
}
