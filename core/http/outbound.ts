import { lookup as dnsLookup, type LookupAddress } from 'node:dns';
import { BlockList, isIP, type LookupFunction } from 'node:net';
import { Agent, fetch, type RequestInit, type Response } from 'undici';

/**
 * Addresses a request on behalf of a tenant must not reach: the machine itself,
 * private and carrier-grade NAT networks, link-local (cloud metadata at
 * 169.254.169.254), documentation, multicast and reserved ranges, and their
 * IPv6 counterparts. IPv4 written inside IPv6 (mapped, NAT64) is refused
 * whole rather than unwrapped.
 */
// One list per family: a single BlockList also matches IPv4 addresses against
// IPv6 rules in their mapped form, and ::ffff:0:0/96 would then take them all.
const NOT_PUBLIC_V4 = new BlockList();
const NOT_PUBLIC_V6 = new BlockList();
for (const [network, prefix] of [
  ['0.0.0.0', 8],
  ['10.0.0.0', 8],
  ['100.64.0.0', 10],
  ['127.0.0.0', 8],
  ['169.254.0.0', 16],
  ['172.16.0.0', 12],
  ['192.0.0.0', 24],
  ['192.0.2.0', 24],
  ['192.168.0.0', 16],
  ['198.18.0.0', 15],
  ['198.51.100.0', 24],
  ['203.0.113.0', 24],
  ['224.0.0.0', 4],
  ['240.0.0.0', 4],
] as const) {
  NOT_PUBLIC_V4.addSubnet(network, prefix, 'ipv4');
}
for (const [network, prefix] of [
  ['::', 128],
  ['::1', 128],
  ['::ffff:0:0', 96],
  ['64:ff9b::', 96],
  ['100::', 64],
  ['2001:db8::', 32],
  ['fc00::', 7],
  ['fe80::', 10],
  ['ff00::', 8],
] as const) {
  NOT_PUBLIC_V6.addSubnet(network, prefix, 'ipv6');
}

export function isPublicAddress(address: string): boolean {
  const family = isIP(address);
  if (family === 0) return false;
  return family === 4 ? !NOT_PUBLIC_V4.check(address, 'ipv4') : !NOT_PUBLIC_V6.check(address, 'ipv6');
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
}

export interface OutboundInit extends RequestInit {
  /** Redirects followed, each checked like the first URL (default 5; 0 returns the 3xx response as it is). */
  maxRedirects?: number;
}

/** Refuses, at connection time, a name that resolves to an address that is not public: DNS is asked once, and that answer is the one connected to. */
const guardedLookup: LookupFunction = (hostname, options, callback) => {
  dnsLookup(hostname, { ...options, all: true }, (error, addresses: LookupAddress[]) => {
    if (error) return callback(error, '', 0);
    const refused = addresses.find(({ address }) => !isPublicAddress(address));
    if (refused) return callback(new OutboundRefusedError(`${hostname} resolves to ${refused.address}, which is not a public address`), '', 0);
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
  readonly #guarded = new Agent({ connect: { lookup: guardedLookup } });
  readonly #open = new Agent();

  constructor(policy: OutboundPolicy) {
    this.#policy = policy;
  }

  /** Throws OutboundRefusedError for a URL that may not be requested (a name's addresses are checked when connecting). */
  check(url: string | URL): URL {
    let target: URL;
    try {
      target = new URL(url);
    } catch {
      throw new OutboundRefusedError(`${String(url)} is not an absolute URL`);
    }
    if (target.protocol !== 'http:' && target.protocol !== 'https:') throw new OutboundRefusedError(`${target.protocol} URLs are not requested; use http or https`);
    if (this.#allows(target)) return target;
    const host = hostOf(target);
    if (isIP(host) && !isPublicAddress(host)) throw new OutboundRefusedError(`${host} is not a public address`);
    return target;
  }

  async fetch(url: string | URL, init: OutboundInit = {}): Promise<Response> {
    const { maxRedirects = 5, ...first } = init;
    let request: RequestInit = first;
    let target = this.check(url);
    for (let redirects = 0; ; redirects++) {
      const response = await fetch(target, { ...request, redirect: 'manual', dispatcher: this.#allows(target) ? this.#open : this.#guarded }).catch(
        (error: Error) => {
          // undici reports a refused lookup as "fetch failed" with the reason as its cause.
          throw error.cause instanceof OutboundRefusedError ? error.cause : error;
        },
      );
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

  async close(): Promise<void> {
    await Promise.all([this.#guarded.close(), this.#open.close()]);
  }

  #allows(target: URL): boolean {
    if (this.#policy.allowPrivate) return true;
    const host = hostOf(target).toLowerCase();
    return this.#policy.allowedHosts.some((allowed) => allowed === host || allowed === `${host}:${target.port || (target.protocol === 'https:' ? '443' : '80')}`);
  }
}
