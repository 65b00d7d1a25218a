import { randomBytes } from 'node:crypto';
import { OutboundRefusedError, splitList, unsafeInputIssues, type Database, type Outbound, type RateLimiter } from 'rpc-service/plugin';
import { OAuthClient } from './client.entity.ts';
import type { OAuthServerConfig } from './config.ts';
import { OAuthError } from './oauth-error.ts';

/** A client as an authorization knows it: from a metadata document it serves, or registered here. */
export interface KnownClient {
  id: string;
  name: string;
  uri: string | null;
  redirectUris: string[];
  kind: 'metadata-document' | 'registered';
}

/** The most of a client metadata document read, and how long fetching it may take. */
const DOCUMENT_LIMIT_BYTES = 64 * 1024;
const DOCUMENT_TIMEOUT_MS = 5000;
/** A document is fetched again after this long; in between, authorizations of the same client use what was read. */
const DOCUMENT_TTL_MS = 5 * 60_000;
const DOCUMENT_CACHE_LIMIT = 1000;
const REDIRECT_URI_LIMIT = 10;

/** Schemes a redirect may never use: they would run or show something in the browser instead of reaching an app. */
const UNSAFE_SCHEMES = new Set(['javascript:', 'data:', 'vbscript:', 'file:', 'about:', 'blob:', 'filesystem:']);

const isLoopback = (url: URL) => url.hostname === '127.0.0.1' || url.hostname === '[::1]' || url.hostname === 'localhost';

/**
 * Why a redirect URI is refused, or null when it is acceptable (OAuth 2.1
 * section 2.3.1 and RFC 8252): an absolute URL without a fragment; https, http
 * only to this machine's loopback (a native app's local listener), or an
 * app's own scheme.
 */
export function redirectUriProblem(text: string): string | null {
  if (!URL.canParse(text)) return `${text.slice(0, 100)} is not an absolute URL`;
  const url = new URL(text);
  if (url.hash !== '' || text.includes('#')) return `${url.origin} redirect URI has a fragment`;
  if (UNSAFE_SCHEMES.has(url.protocol)) return `${url.protocol} redirect URIs are not allowed`;
  if (url.protocol === 'http:' && !isLoopback(url))
    return 'http redirect URIs are allowed only to the loopback address (127.0.0.1, [::1] or localhost); use https';
  return null;
}

/** RFC 8252 section 7.3: a loopback redirect may use any port; anything else must match exactly. */
export function redirectMatches(registered: string, presented: string): boolean {
  if (registered === presented) return true;
  if (!URL.canParse(registered) || !URL.canParse(presented)) return false;
  const [a, b] = [new URL(registered), new URL(presented)];
  if (a.protocol !== 'http:' || !isLoopback(a) || b.protocol !== 'http:' || !isLoopback(b)) return false;
  a.port = b.port = '';
  return a.href === b.href;
}

const text = (value: unknown, name: string, max: number): string | null => {
  if (value === undefined || value === null) return null;
  if (typeof value !== 'string' || value.length > max) throw new OAuthError('invalid_client_metadata', `${name} must be text of at most ${max} characters`);
  return value;
};

/** Checks what every client says of itself, registered or in its document: redirect URIs, grant and response types, name, home page. */
function clientMetadata(document: Record<string, unknown>): Omit<KnownClient, 'id' | 'kind'> {
  const uris = document.redirect_uris;
  if (!Array.isArray(uris) || uris.length === 0 || uris.length > REDIRECT_URI_LIMIT || !uris.every((uri) => typeof uri === 'string')) {
    throw new OAuthError('invalid_redirect_uri', `redirect_uris must list 1 to ${REDIRECT_URI_LIMIT} URIs`);
  }
  for (const uri of uris as string[]) {
    const problem = redirectUriProblem(uri);
    if (problem) throw new OAuthError('invalid_redirect_uri', problem);
  }
  const grants = document.grant_types ?? ['authorization_code'];
  if (!Array.isArray(grants) || !grants.every((grant) => grant === 'authorization_code' || grant === 'refresh_token')) {
    throw new OAuthError('invalid_client_metadata', 'grant_types may be authorization_code and refresh_token only');
  }
  const responses = document.response_types ?? ['code'];
  if (!Array.isArray(responses) || !responses.every((type) => type === 'code')) {
    throw new OAuthError('invalid_client_metadata', 'response_types may be code only');
  }
  const uri = text(document.client_uri, 'client_uri', 2000);
  if (uri !== null && (!URL.canParse(uri) || !/^https?:$/.test(new URL(uri).protocol)))
    throw new OAuthError('invalid_client_metadata', 'client_uri must be an http(s) URL');
  return { name: text(document.client_name, 'client_name', 200) ?? 'Unnamed client', uri, redirectUris: uris as string[] };
}

/**
 * The clients authorizations are asked for: those that name themselves by the
 * https URL of a Client ID Metadata Document, fetched through the outbound
 * guard (so never from a private address unless the operator allows it), and
 * those registered by dynamic client registration (RFC 7591).
 */
export class ClientDirectory {
  readonly #db: Database;
  readonly #outbound: Outbound;
  readonly #limiter: RateLimiter;
  readonly #config: OAuthServerConfig;
  readonly #documents = new Map<string, { client: KnownClient; until: number }>();

  constructor({ db, outbound, rateLimiter, config }: { db: Database; outbound: Outbound; rateLimiter: RateLimiter; config: OAuthServerConfig }) {
    this.#db = db;
    // Nobody authenticated names the document: it may reach public addresses only, not what the operator lets tenants reach.
    this.#outbound = outbound.narrowed(splitList(config.OAUTH_SERVER_CLIENT_DOCUMENT_HOSTS));
    this.#limiter = rateLimiter;
    this.#config = config;
  }

  /** RFC 7591: registers a public client (PKCE is its proof; no secret is issued). */
  async register(body: unknown, clientIp: string): Promise<Record<string, unknown>> {
    await this.#limiter.take(`oauth-server.register:${clientIp}`, this.#config.OAUTH_SERVER_REGISTRATION_IP_LIMIT, 3600);
    if (typeof body !== 'object' || body === null || Array.isArray(body)) throw new OAuthError('invalid_client_metadata', 'The body must be a JSON object');
    const [unsafe] = unsafeInputIssues(body);
    if (unsafe) throw new OAuthError('invalid_client_metadata', `${unsafe.path} ${unsafe.message}`);
    const metadata = clientMetadata(body as Record<string, unknown>);
    const method = (body as Record<string, unknown>).token_endpoint_auth_method;
    if (method !== undefined && method !== 'none') {
      throw new OAuthError('invalid_client_metadata', 'token_endpoint_auth_method must be none: clients here are public and prove themselves with PKCE');
    }
    const client = { id: `oac_${randomBytes(16).toString('base64url')}`, ...metadata, createdAt: new Date() };
    const em = this.#db.forkEm(null);
    em.create(OAuthClient, client);
    await em.flush();
    return {
      client_id: client.id,
      client_id_issued_at: Math.floor(client.createdAt.getTime() / 1000),
      client_name: client.name,
      ...(client.uri ? { client_uri: client.uri } : {}),
      redirect_uris: client.redirectUris,
      grant_types: ['authorization_code', 'refresh_token'],
      response_types: ['code'],
      token_endpoint_auth_method: 'none',
    };
  }

  /** The client a `client_id` names; `invalid_client` when it is unknown or its document cannot be used. */
  async resolve(clientId: string): Promise<KnownClient> {
    if (clientId.startsWith('https://')) return this.#fromDocument(clientId);
    if (!/^oac_[A-Za-z0-9_-]{22}$/.test(clientId)) throw new OAuthError('invalid_client', 'Unknown client_id');
    const row = await this.#db.forkEm(null).findOne(OAuthClient, { id: clientId });
    if (!row) throw new OAuthError('invalid_client', 'Unknown client_id');
    return { id: row.id, name: row.name, uri: row.uri ?? null, redirectUris: row.redirectUris, kind: 'registered' };
  }

  async #fromDocument(clientId: string): Promise<KnownClient> {
    const cached = this.#documents.get(clientId);
    if (cached && cached.until > Date.now()) return cached.client;
    const url = URL.canParse(clientId) ? new URL(clientId) : undefined;
    if (!url || url.pathname === '/' || url.hash !== '' || url.username !== '' || url.password !== '') {
      throw new OAuthError('invalid_client', 'A client_id URL must be https with a path, and no fragment or credentials');
    }
    let document: Record<string, unknown>;
    try {
      const response = await this.#outbound.fetch(url, {
        maxRedirects: 0,
        headers: { accept: 'application/json' },
        signal: AbortSignal.timeout(DOCUMENT_TIMEOUT_MS),
      });
      if (response.status !== 200) {
        await response.body?.cancel();
        throw new OAuthError('invalid_client', `The client metadata document answered ${response.status}`);
      }
      document = JSON.parse(await limitedText(response.body as ReadableStream<Uint8Array> | null, DOCUMENT_LIMIT_BYTES));
    } catch (error) {
      if (error instanceof OAuthError) throw error;
      const why = error instanceof OutboundRefusedError ? error.message : error instanceof SyntaxError ? 'it is not JSON' : 'it could not be fetched';
      throw new OAuthError('invalid_client', `The client metadata document was not used: ${why}`);
    }
    if (typeof document !== 'object' || document === null || Array.isArray(document))
      throw new OAuthError('invalid_client', 'The client metadata document is not a JSON object');
    if (document.client_id !== clientId) throw new OAuthError('invalid_client', 'The client metadata document names another client_id than its own URL');
    const method = document.token_endpoint_auth_method;
    if (method !== undefined && method !== 'none')
      throw new OAuthError('invalid_client', 'Only public clients (token_endpoint_auth_method none) are supported');
    let client: KnownClient;
    try {
      client = { id: clientId, ...clientMetadata(document), kind: 'metadata-document' };
    } catch (error) {
      throw error instanceof OAuthError ? new OAuthError('invalid_client', `The client metadata document is not usable: ${error.description}`) : error;
    }
    if (this.#documents.size >= DOCUMENT_CACHE_LIMIT) this.#documents.clear();
    this.#documents.set(clientId, { client, until: Date.now() + DOCUMENT_TTL_MS });
    return client;
  }
}

/** A response body as text, refused past `limit` bytes without reading the rest. */
async function limitedText(body: ReadableStream<Uint8Array> | null, limit: number): Promise<string> {
  if (!body) return '';
  const chunks: Uint8Array[] = [];
  let size = 0;
  for await (const chunk of body) {
    size += chunk.byteLength;
    if (size > limit) {
      await body.cancel().catch(() => undefined);
      throw new OAuthError('invalid_client', `The client metadata document is larger than ${limit} bytes`);
    }
    chunks.push(chunk);
  }
  return Buffer.concat(chunks).toString('utf8');
}
