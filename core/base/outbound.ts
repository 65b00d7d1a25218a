import { lookup as dnsLookup, type LookupAddress } from 'node:dns';
import { readFileSync } from 'node:fs';
import { rootCertificates } from 'node:tls';
import { isIP, type LookupFunction } from 'node:net';
import ipaddr from 'ipaddr.js';
import type * as Undici from 'undici';
import type { Agent, RequestInit, Response } from 'undici';
import { currentTraceparent, failedWith, inSpan, SpanKind, tracingOn, type Span } from './tracing.ts';

/** IANA's global unicast space (RFC 4291 section 2.4): outside it, no IPv6 address is public, e.g. the IPv4-compatible ::/96 (::127.0.0.1). */
const GLOBAL_UNICAST_V6 = ipaddr.parseCIDR('2000::/3');

/**
 * Addresses a request on behalf of a tenant must not reach: every range
 * ipaddr.js names among IANA's special-purpose ones (the machine itself,
 * private and carrier-grade NAT networks, link-local with cloud metadata at
 * 169.254.169.254, documentation, benchmarking, multicast, reserved, ...).
 * IPv6 forms that carry an IPv4 address (mapped, IPv4-compatible, 6to4, NAT64,
 * Teredo) are refused whole rather than unwrapped.
 */
export function isPublicAddress(address: string): boolean {
  if (isIP(address) === 0) return false;
  const parsed = ipaddr.parse(address);
  if (parsed.range() !== 'unicast') return false;
  return parsed.kind() === 'ipv4' || parsed.match(GLOBAL_UNICAST_V6);
}

/** The URL's host without the brackets of an IPv6 literal. */
const hostOf = (url: URL) => url.hostname.replace(/^\[(.*)\]$/, '$1');

export class OutboundRefusedError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'OutboundRefusedError';
  }
}

export interface OutboundPolicy {
  /** Lets requests reach any address (`OUTBOUND_ALLOW_PRIVATE`). */
  allowPrivate: boolean;
  /** Hosts (`name` or `name:port`) allowed whatever they resolve to (`OUTBOUND_ALLOWED_HOSTS`). */
  allowedHosts: readonly string[];
  /** A PEM file of certificate authorities trusted besides Node's own (`OUTBOUND_CA_FILE`). */
  caFile?: string;
}

export interface OutboundInit extends RequestInit {
  /** Redirects followed, each checked like the first URL (default 5; 0 returns the 3xx response as it is). */
  maxRedirects?: number;
}

const notPublic = (host: string) => `${host} is not a public address`;

/** Refuses, at connection time, a name that resolves to an address that is not public: DNS is asked once, and that answer is the one connected to. */
const guardedLookup: LookupFunction = (hostname, options, callback) => {
  dnsLookup(hostname, { ...options, all: true }, (error, addresses: LookupAddress[]) => {
    if (error) return callback(error, '', 0);
    // The address itself is not told: it would map the operator's network for whoever chose the name.
    if (addresses.some(({ address }) => !isPublicAddress(address))) return callback(new OutboundRefusedError(notPublic(hostname)), '', 0);
    if (options.all) return (callback as unknown as (error: null, addresses: LookupAddress[]) => void)(null, addresses);
    callback(null, addresses[0]!.address, addresses[0]!.family);
  });
};

/**
 * Every outbound HTTP request made for a tenant (webhooks, push endpoints,
 * workflow http nodes, tenant-configured AI providers) goes through this:
 * only http(s), and only to public addresses, checked after DNS resolution
 * and again for each redirect, unless the policy allows the host.
 */
export class Outbound {
  readonly #policy: OutboundPolicy;
  /** The certificate authorities trusted, when the operator adds some: read at start, so a missing file stops it. */
  readonly #ca: string[] | undefined;
  /** undici and its connection pools, loaded and made on the first request: many services never send one. */
  #client: Promise<Client> | undefined;

  constructor(policy: OutboundPolicy) {
    this.#policy = policy;
    this.#ca = policy.caFile ? [...rootCertificates, readFileSync(policy.caFile, 'utf8')] : undefined;
  }

  /** Throws OutboundRefusedError for a URL that may not be requested (a name's addresses are checked when connecting). */
  check(url: string | URL): URL {
    let target: URL;
    try {
      target = new URL(url);
    } catch {
      throw new OutboundRefusedError(`${String(url)} is not an absolute URL`);
    }
    if (target.protocol !== 'http:' && target.protocol !== 'https:')
      throw new OutboundRefusedError(`${target.protocol} URLs are not requested; use http or https`);
    if (this.#allows(target)) return target;
    const host = hostOf(target);
    if (isIP(host) && !isPublicAddress(host)) throw new OutboundRefusedError(notPublic(host));
    return target;
  }

  /**
   * A guard for requests nobody authenticated asked for (a client metadata
   * document an OAuth client names): public addresses only, whatever
   * OUTBOUND_ALLOW_PRIVATE and OUTBOUND_ALLOWED_HOSTS let tenants reach,
   * except `allowedHosts`; the certificate authorities are the same.
   */
  narrowed(allowedHosts: readonly string[]): Outbound {
    return new Outbound({
      allowPrivate: false,
      allowedHosts: allowedHosts.map((host) => host.toLowerCase()),
      ...(this.#policy.caFile ? { caFile: this.#policy.caFile } : {}),
    });
  }

  async fetch(url: string | URL, init: OutboundInit = {}): Promise<Response> {
    const { maxRedirects = 5, ...first } = init;
    let request: RequestInit = first;
    let target = this.check(url);
    for (let redirects = 0; ; redirects++) {
      const response = await this.#send(target, request);
      const location = response.headers.get('location');
      if (response.status < 300 || response.status >= 400 || !location || redirects >= maxRedirects) return response;
      await response.body?.cancel();
      target = this.check(new URL(location, target));
      // As browsers do: 303, and 301 or 302 after a POST, continue as a GET without the body.
      const method = (request.method ?? 'GET').toUpperCase();
      if (response.status === 303 || ((response.status === 301 || response.status === 302) && method === 'POST')) {
        request = { ...request, method: 'GET', body: undefined };
      }
    }
  }

  /**
   * One request, without following a redirect. With tracing on it is a client
   * span carrying `traceparent` to the receiver; the span names the scheme,
   * host and port only, as a path or query may hold a secret (a webhook's token).
   */
  #send(target: URL, request: RequestInit): Promise<Response> {
    const method = (request.method ?? 'GET').toUpperCase();
    const attributes = tracingOn()
      ? { 'http.request.method': method, 'url.scheme': target.protocol.slice(0, -1), 'server.address': hostOf(target), 'server.port': portOf(target) }
      : undefined;
    return inSpan({ name: method, kind: SpanKind.CLIENT, attributes, outcome: describeResponse }, async () => {
      const { undici, guarded, open } = await (this.#client ??= loadClient(this.#ca));
      const headers = tracingOn() ? withTraceparent(undici.Headers, request.headers) : request.headers;
      return undici.fetch(target, { ...request, headers, redirect: 'manual', dispatcher: this.#allows(target) ? open : guarded }).catch((error: Error) => {
        // undici reports a refused lookup as "fetch failed" with the reason as its cause.
        throw error.cause instanceof OutboundRefusedError ? error.cause : error;
      });
    });
  }

  async close(): Promise<void> {
    if (!this.#client) return;
    const { guarded, open } = await this.#client;
    await Promise.all([guarded.close(), open.close()]);
  }

  #allows(target: URL): boolean {
    if (this.#policy.allowPrivate) return true;
    const host = hostOf(target).toLowerCase();
    return this.#policy.allowedHosts.some((allowed) => allowed === host || allowed === `${host}:${portOf(target)}`);
  }
}

interface Client {
  undici: typeof Undici;
  /** For addresses checked when connecting; `open` for what the policy allows. */
  guarded: Agent;
  open: Agent;
}

async function loadClient(ca: string[] | undefined): Promise<Client> {
  const undici = await import('undici');
  const trust = ca ? { ca } : {};
  return { undici, guarded: new undici.Agent({ connect: { lookup: guardedLookup, ...trust } }), open: new undici.Agent({ connect: trust }) };
}

const portOf = (url: URL): number => Number(url.port || (url.protocol === 'https:' ? 443 : 80));

/** The request's headers with the active span's `traceparent`, which is the request's own span. */
function withTraceparent(Headers: typeof Undici.Headers, given: RequestInit['headers']): Undici.Headers {
  const headers = new Headers(given);
  const traceparent = currentTraceparent();
  if (traceparent) headers.set('traceparent', traceparent);
  return headers;
}

function describeResponse(span: Span, response: Response): void {
  span.setAttribute('http.response.status_code', response.status);
  if (response.status >= 400) failedWith(span, String(response.status));
}
