import { createHash, randomUUID } from 'node:crypto';
import * as v from 'valibot';
import {
  ACCESS_TOKEN_PREFIX,
  conflict,
  forbidden,
  notFound,
  randomToken,
  sha256Hex,
  unauthenticated,
  type AuthenticatedContext,
  type CredentialCache,
  type Credentials,
  type CredentialVerifier,
  type Database,
  type Door,
  type EntityManager,
  type OperationCaller,
  type PluginServices,
  type Principal,
  type RateLimiter,
  type RowOf,
  wireTimestamp,
} from 'rpc-service/plugin';
import { OAuthAuthorization } from './authorization.entity.ts';
import { redirectMatches, type ClientDirectory } from './client-directory.ts';
import type { OAuthServerConfig } from './config.ts';
import { OAuthGrant } from './grant.entity.ts';
import { OAuthError } from './oauth-error.ts';
import { ScopeVocabulary, within, type Access } from './scopes.ts';
import { OAuthToken } from './token.entity.ts';

const REFRESH_TOKEN_PREFIX = 'ort_';
/** How long a consent page may stay open, and how long a code lives once granted (OAuth 2.1 section 4.1.2 advises short). */
const REQUEST_TTL_MS = 10 * 60_000;
const CODE_TTL_MS = 60_000;

/** Where each door's token may be used, as a path of the service: the resource a client names (RFC 8707). */
export const DOOR_PATHS: Record<Door, string> = { mcp: '/mcp', api: '/api/rpc' };

const DOOR = v.picklist(['mcp', 'api']);

/** What the consent page shows. */
export const CONSENT = v.strictObject({
  client: v.strictObject({ id: v.string(), name: v.string(), uri: v.nullable(v.string()), kind: v.picklist(['metadata-document', 'registered']) }),
  redirectUri: v.string(),
  redirectHost: v.string(),
  door: DOOR,
  /** The door's path: `/mcp` or `/api/rpc`. */
  resource: v.string(),
  /** The scopes asked for; every group when the request named none (`everything`). */
  scopes: v.array(v.strictObject({ scope: v.string(), describe: v.string() })),
  /** The request named no scope: it asks for everything the user's role allows. */
  everything: v.boolean(),
  readOnly: v.boolean(),
  expiresAt: wireTimestamp,
});
export type Consent = v.InferOutput<typeof CONSENT>;

/** A grant as its user (or an admin) sees it in the list of authorised apps. */
export const APP_GRANT = v.strictObject({
  id: v.string(),
  userId: v.string(),
  clientId: v.string(),
  clientName: v.string(),
  redirectHost: v.string(),
  door: DOOR,
  scopes: v.nullable(v.array(v.string())),
  readOnly: v.boolean(),
  createdAt: wireTimestamp,
  refreshedAt: wireTimestamp,
});
export type AppGrant = v.InferOutput<typeof APP_GRANT>;

type AccessRow = RowOf<OAuthToken, 'subscriptionId' | 'grantId' | 'expiresAt'> & RowOf<OAuthGrant, 'userId' | 'scopes' | 'readOnly' | 'door'>;
type RefreshRow = RowOf<OAuthToken, 'subscriptionId' | 'grantId' | 'expiresAt' | 'usedAt'>;

const s256 = (verifier: string) => createHash('sha256').update(verifier).digest('base64url');
const hostOf = (uri: string) => (URL.canParse(uri) ? new URL(uri).host || new URL(uri).protocol : uri);

/** RFC 7636 section 4.1: 43 to 128 characters of the unreserved set. */
const VERIFIER = /^[A-Za-z0-9._~-]{43,128}$/;
const CHALLENGE = /^[A-Za-z0-9_-]{43}$/;

/**
 * The OAuth 2.1 authorization server of the service (docs/decisions/0064-oauth-for-agents.md):
 * authorization requests and consent, codes exchanged with PKCE, access and
 * refresh tokens stored hashed, rotation with reuse detection, revocation; and
 * the verifier the core authenticates access tokens with.
 */
export class OAuthServerService implements CredentialVerifier {
  readonly #db: Database;
  readonly #credentials: Credentials;
  readonly #limiter: RateLimiter;
  readonly #users: PluginServices['userService'];
  readonly #clients: ClientDirectory;
  readonly #config: OAuthServerConfig;
  readonly #cache: CredentialCache;
  readonly vocabulary: ScopeVocabulary;

  constructor(deps: {
    db: Database;
    credentials: Credentials;
    rateLimiter: RateLimiter;
    operations: OperationCaller;
    userService: PluginServices['userService'];
    clientDirectory: ClientDirectory;
    config: OAuthServerConfig;
  }) {
    this.#db = deps.db;
    this.#credentials = deps.credentials;
    this.#limiter = deps.rateLimiter;
    this.#users = deps.userService;
    this.#clients = deps.clientDirectory;
    this.#config = deps.config;
    this.#cache = deps.credentials.createCache();
    this.vocabulary = new ScopeVocabulary(deps.operations);
  }

  /** RFC 8414: what a client needs to know of this server. */
  serverMetadata(issuer: string): Record<string, unknown> {
    return {
      issuer,
      authorization_endpoint: `${issuer}/oauth/authorize`,
      token_endpoint: `${issuer}/oauth/token`,
      registration_endpoint: `${issuer}/oauth/register`,
      revocation_endpoint: `${issuer}/oauth/revoke`,
      scopes_supported: this.vocabulary.supported(),
      response_types_supported: ['code'],
      response_modes_supported: ['query'],
      grant_types_supported: ['authorization_code', 'refresh_token'],
      code_challenge_methods_supported: ['S256'],
      token_endpoint_auth_methods_supported: ['none'],
      revocation_endpoint_auth_methods_supported: ['none'],
      client_id_metadata_document_supported: true,
      authorization_response_iss_parameter_supported: true,
      service_documentation: `${issuer}/openrpc.json`,
    };
  }

  /** RFC 9728: a door as a protected resource, and the server that issues its tokens (this one). */
  resourceMetadata(issuer: string, door: Door): Record<string, unknown> {
    return {
      resource: `${issuer}${DOOR_PATHS[door]}`,
      authorization_servers: [issuer],
      scopes_supported: this.vocabulary.supported(),
      bearer_methods_supported: ['header'],
      resource_name: door === 'mcp' ? 'MCP' : 'JSON RPC API',
    };
  }

  /**
   * `GET /oauth/authorize`: checks the request and keeps it for the consent
   * page, whose address it answers. Until the client and its redirect URI are
   * known good, a problem is thrown (shown to the user, never redirected);
   * after, it is sent back to the client as the redirect's `error`.
   */
  async authorize(query: URLSearchParams, issuer: string, clientIp: string): Promise<string> {
    await this.#limiter.take(`oauth-server.authorize:${clientIp}`, this.#config.OAUTH_SERVER_AUTHORIZE_IP_LIMIT, 60);
    const single = (name: string): string | undefined => {
      const values = query.getAll(name);
      if (values.length > 1) throw new OAuthError('invalid_request', `${name} is given more than once`);
      return values[0];
    };
    const clientId = single('client_id');
    if (!clientId) throw new OAuthError('invalid_request', 'client_id is missing');
    const client = await this.#clients.resolve(clientId);
    const redirectUri = single('redirect_uri');
    if (!redirectUri) throw new OAuthError('invalid_request', 'redirect_uri is missing');
    if (!client.redirectUris.some((registered) => redirectMatches(registered, redirectUri))) {
      throw new OAuthError('invalid_request', `redirect_uri is not one of ${client.name}'s registered redirect URIs`);
    }
    const state = single('state');
    const back = (error: OAuthError) => redirectWith(redirectUri, { error: error.error, error_description: error.description, state, iss: issuer });
    try {
      if (single('response_type') !== 'code') throw new OAuthError('unsupported_response_type', 'response_type must be code');
      const challenge = single('code_challenge');
      if (single('code_challenge_method') !== 'S256' || !challenge || !CHALLENGE.test(challenge)) {
        throw new OAuthError('invalid_request', 'PKCE is required: code_challenge (S256 of the verifier, base64url) with code_challenge_method=S256');
      }
      const door = this.#doorOf(single('resource'), issuer);
      const asked = this.vocabulary.parse(single('scope'));
      if (state !== undefined && state.length > 1000) throw new OAuthError('invalid_request', 'state is longer than 1000 characters');
      const request = randomToken(32);
      const em = this.#db.forkEm(null);
      await em.nativeDelete(OAuthAuthorization, { expiresAt: { $lt: new Date() } });
      em.create(OAuthAuthorization, {
        requestHash: sha256Hex(request),
        issuer,
        clientId: client.id,
        clientName: client.name,
        clientUri: client.uri,
        clientKind: client.kind,
        redirectUri,
        codeChallenge: challenge,
        state: state ?? null,
        door,
        scopes: asked.scopes,
        readOnly: asked.readOnly,
        expiresAt: new Date(Date.now() + REQUEST_TTL_MS),
        codeHash: null,
        approverSubscriptionId: null,
        approverUserId: null,
        grantedScopes: null,
        grantedReadOnly: null,
        grantId: null,
      });
      await em.flush();
      return `${issuer}/console#/authorize/${request}`;
    } catch (error) {
      if (error instanceof OAuthError) return back(error);
      throw error;
    }
  }

  /** RFC 8707: the resource must be one of this service's doors. */
  #doorOf(resource: string | undefined, issuer: string): Door {
    if (!resource) throw new OAuthError('invalid_target', `resource is required: ${issuer}${DOOR_PATHS.mcp} or ${issuer}${DOOR_PATHS.api}`);
    const door = (Object.keys(DOOR_PATHS) as Door[]).find((each) => resource.replace(/\/$/, '') === `${issuer}${DOOR_PATHS[each]}`);
    if (!door)
      throw new OAuthError(
        'invalid_target',
        `${resource.slice(0, 200)} is not a resource of this server: use ${issuer}${DOOR_PATHS.mcp} or ${issuer}${DOOR_PATHS.api}`,
      );
    return door;
  }

  /** A pending request, for the consent page of the signed-in user. */
  async getConsent(ctx: AuthenticatedContext, request: string): Promise<Consent> {
    const pending = await this.#pending(ctx, request);
    return {
      client: { id: pending.clientId, name: pending.clientName, uri: pending.clientUri ?? null, kind: pending.clientKind as Consent['client']['kind'] },
      redirectUri: pending.redirectUri,
      redirectHost: hostOf(pending.redirectUri),
      door: pending.door as Door,
      resource: DOOR_PATHS[pending.door as Door],
      // A request that names no scope asks for every group: each is offered, so the user may still untick some.
      scopes: this.vocabulary.describe(pending.scopes ?? this.vocabulary.supported()),
      everything: !pending.scopes,
      readOnly: pending.readOnly,
      expiresAt: pending.expiresAt.toISOString(),
    };
  }

  /** The user grants what was asked, or less: a code goes back to the client's redirect URI. */
  async approveConsent(ctx: AuthenticatedContext, request: string, granted: Access): Promise<{ redirectTo: string }> {
    const pending = await this.#pending(ctx, request);
    const asked = { scopes: pending.scopes ?? null, readOnly: pending.readOnly };
    if (!within(granted, asked)) {
      throw forbidden(`A grant may only narrow what ${pending.clientName} asked for: ${this.vocabulary.format(asked) || 'everything your role allows'}`);
    }
    if (granted.scopes) this.vocabulary.parse(granted.scopes.join(' '));
    const code = randomToken(32);
    const claimed = await this.#db.execute<{ request_hash: string }>(
      `update oauth_server_authorization set code_hash = ?, approver_subscription_id = ?, approver_user_id = ?, granted_scopes = ?, granted_read_only = ?, expires_at = ?
       where request_hash = ? and code_hash is null returning request_hash`,
      [
        sha256Hex(code),
        ctx.subscriptionId,
        ctx.userId,
        granted.scopes === null ? null : JSON.stringify(granted.scopes),
        granted.readOnly,
        new Date(Date.now() + CODE_TTL_MS),
        pending.requestHash,
      ],
    );
    if (claimed.length === 0) throw conflict('This authorization request was answered already');
    return { redirectTo: redirectWith(pending.redirectUri, { code, state: pending.state ?? undefined, iss: pending.issuer }) };
  }

  /** The user refuses: the client hears `access_denied`. */
  async denyConsent(ctx: AuthenticatedContext, request: string): Promise<{ redirectTo: string }> {
    const pending = await this.#pending(ctx, request);
    await this.#db.forkEm(null).nativeDelete(OAuthAuthorization, { requestHash: pending.requestHash, codeHash: null });
    const error = { error: 'access_denied', error_description: 'The user did not authorize this client' };
    return { redirectTo: redirectWith(pending.redirectUri, { ...error, state: pending.state ?? undefined, iss: pending.issuer }) };
  }

  /**
   * Consent is a person's, given in the browser they signed in with: an API
   * key or an app's token could otherwise grant an app more than itself.
   */
  async #pending(ctx: AuthenticatedContext, request: string): Promise<OAuthAuthorization> {
    if (ctx.sessionId === null || ctx.limits !== null) throw forbidden('Apps are authorised in a browser session, not with an API key or an access token');
    const pending = await this.#db.forkEm(null).findOne(OAuthAuthorization, { requestHash: sha256Hex(request) });
    if (!pending || pending.expiresAt.getTime() <= Date.now()) throw notFound('This authorization request is unknown or has expired; start again from the app');
    if (pending.codeHash !== null) throw conflict('This authorization request was answered already');
    return pending;
  }

  /** `POST /oauth/token`: a code or a refresh token for a new access token (and refresh token). */
  async token(form: URLSearchParams, issuer: string): Promise<Record<string, unknown>> {
    refuseRepeated(form);
    const grantType = form.get('grant_type');
    if (grantType === 'authorization_code') return this.#exchangeCode(form, issuer);
    if (grantType === 'refresh_token') return this.#refresh(form, issuer);
    throw new OAuthError('unsupported_grant_type', 'grant_type must be authorization_code or refresh_token');
  }

  async #exchangeCode(form: URLSearchParams, issuer: string): Promise<Record<string, unknown>> {
    const code = form.get('code');
    const verifier = form.get('code_verifier');
    if (!code || !verifier) throw new OAuthError('invalid_request', 'code and code_verifier are required');
    const em = this.#db.forkEm(null);
    const granted = await em.findOne(OAuthAuthorization, { codeHash: sha256Hex(code) });
    if (!granted) throw new OAuthError('invalid_grant', 'The code is unknown or has expired');
    if (granted.grantId) {
      // RFC 6749 section 4.1.2: a code used twice was stolen; what it gave is taken back.
      await this.#revokeGrant(granted.approverSubscriptionId!, granted.grantId);
      throw new OAuthError('invalid_grant', 'The code was used already; the tokens issued for it are revoked');
    }
    if (granted.expiresAt.getTime() <= Date.now()) throw new OAuthError('invalid_grant', 'The code has expired');
    if (form.get('client_id') !== granted.clientId) throw new OAuthError('invalid_grant', 'The code was issued to another client');
    if (form.get('redirect_uri') !== granted.redirectUri) throw new OAuthError('invalid_grant', 'redirect_uri differs from the authorization request');
    if (!VERIFIER.test(verifier) || s256(verifier) !== granted.codeChallenge)
      throw new OAuthError('invalid_grant', 'The code_verifier does not match the code_challenge');
    const resource = form.get('resource');
    if (resource !== null && this.#doorOf(resource, issuer) !== granted.door)
      throw new OAuthError('invalid_target', 'resource differs from the authorization request');
    const grantId = randomUUID();
    const claimed = await this.#db.execute<{ request_hash: string }>(
      'update oauth_server_authorization set grant_id = ? where request_hash = ? and grant_id is null returning request_hash',
      [grantId, granted.requestHash],
    );
    if (claimed.length === 0) throw new OAuthError('invalid_grant', 'The code was used already');
    const holder = await this.#users.credentialHolder(granted.approverSubscriptionId!, granted.approverUserId!);
    if (!holder?.isActive) throw new OAuthError('invalid_grant', 'The user who authorized this is no longer active');
    const tenant = this.#db.forkEm(granted.approverSubscriptionId!);
    const now = new Date();
    tenant.create(OAuthGrant, {
      subscriptionId: granted.approverSubscriptionId!,
      id: grantId,
      userId: granted.approverUserId!,
      clientId: granted.clientId,
      clientName: granted.clientName,
      redirectUri: granted.redirectUri,
      door: granted.door,
      scopes: granted.grantedScopes ?? null,
      readOnly: granted.grantedReadOnly ?? false,
      createdAt: now,
      refreshedAt: now,
    });
    const tokens = this.#issue(tenant, granted.approverSubscriptionId!, grantId);
    await tenant.flush();
    return withScope(tokens, this.vocabulary.format({ scopes: granted.grantedScopes ?? null, readOnly: granted.grantedReadOnly ?? false }));
  }

  /**
   * Rotation (OAuth 2.1 section 4.3.1): each refresh token is used once; a
   * second use revokes the grant, as only a thief (or a client that lost
   * track) would present it. Used tokens are kept until they expire, so any
   * of them presented again is seen. A refresh refused for its params uses
   * nothing up: the checks come before the token is claimed.
   */
  async #refresh(form: URLSearchParams, issuer: string): Promise<Record<string, unknown>> {
    const presented = form.get('refresh_token');
    if (!presented?.startsWith(REFRESH_TOKEN_PREFIX)) throw new OAuthError('invalid_request', 'refresh_token is missing or malformed');
    const tokenHash = sha256Hex(presented);
    const now = new Date();
    const [row] = await this.#db.execute<RefreshRow>(
      "select subscription_id, grant_id, expires_at, used_at from oauth_server_token where token_hash = ? and kind = 'refresh'",
      [tokenHash],
    );
    if (!row) throw new OAuthError('invalid_grant', 'The refresh token is unknown or revoked');
    const reused = async () => {
      await this.#revokeGrant(row.subscription_id, row.grant_id);
      return new OAuthError('invalid_grant', 'This refresh token was used already: the grant is revoked; authorize the app again');
    };
    if (row.used_at !== null) throw await reused();
    if (new Date(row.expires_at).getTime() <= now.getTime()) throw new OAuthError('invalid_grant', 'The refresh token has expired');
    const tenant = this.#db.forkEm(row.subscription_id);
    const grant = await tenant.findOne(OAuthGrant, { id: row.grant_id });
    if (!grant) throw new OAuthError('invalid_grant', 'The grant of this refresh token was revoked');
    if (form.get('client_id') !== grant.clientId) throw new OAuthError('invalid_grant', 'The refresh token was issued to another client');
    const resource = form.get('resource');
    if (resource !== null && this.#doorOf(resource, issuer) !== grant.door) throw new OAuthError('invalid_target', 'resource differs from the grant');
    const access = { scopes: grant.scopes ?? null, readOnly: grant.readOnly };
    const scope = form.get('scope');
    if (scope !== null && !within(this.vocabulary.parse(scope), access))
      throw new OAuthError('invalid_scope', 'A refresh may not ask for more than the grant gives');
    const claimed = await this.#db.execute<{ id: string }>(
      "update oauth_server_token set used_at = ? where subscription_id = ? and token_hash = ? and kind = 'refresh' and used_at is null returning id",
      [now, row.subscription_id, tokenHash],
    );
    // Presented twice at once: one refresh won, and the other is a second use.
    if (claimed.length === 0) throw await reused();
    await tenant.nativeDelete(OAuthToken, { grantId: grant.id, expiresAt: { $lt: now } });
    grant.refreshedAt = now;
    const tokens = this.#issue(tenant, grant.subscriptionId, grant.id);
    await tenant.flush();
    return withScope(tokens, this.vocabulary.format(access));
  }

  /**
   * Ends what is over (the plugin's sweep job): authorization requests past
   * their time, expired tokens, grants no token is left for, and registered
   * clients that are a day old and authorised by nobody.
   */
  async sweep(): Promise<{ requests: number; tokens: number; grants: number; clients: number }> {
    const now = new Date();
    const count = async (sql: string, params: unknown[]) =>
      (await this.#db.execute<{ n: number }>(`with gone as (${sql} returning 1) select count(*)::int as n from gone`, params))[0]!.n;
    const requests = await count('delete from oauth_server_authorization where expires_at < ?', [now]);
    const tokens = await count('delete from oauth_server_token where expires_at < ?', [now]);
    const grants = await count(
      `delete from oauth_server_grant g where not exists
         (select 1 from oauth_server_token t where t.subscription_id = g.subscription_id and t.grant_id = g.id)`,
      [],
    );
    const clients = await count(
      `delete from oauth_server_client c where c.created_at < ?
         and not exists (select 1 from oauth_server_grant g where g.client_id = c.id)
         and not exists (select 1 from oauth_server_authorization a where a.client_id = c.id)`,
      [new Date(now.getTime() - 86_400_000)],
    );
    return { requests, tokens, grants, clients };
  }

  #issue(em: EntityManager, subscriptionId: string, grantId: string) {
    const accessToken = `${ACCESS_TOKEN_PREFIX}${randomToken(32)}`;
    const refreshToken = `${REFRESH_TOKEN_PREFIX}${randomToken(32)}`;
    const now = Date.now();
    const row = (kind: string, token: string, ttlSeconds: number) =>
      em.create(OAuthToken, {
        subscriptionId,
        id: randomUUID(),
        grantId,
        kind,
        tokenHash: sha256Hex(token),
        expiresAt: new Date(now + ttlSeconds * 1000),
        usedAt: null,
      });
    row('access', accessToken, this.#config.OAUTH_SERVER_ACCESS_TOKEN_TTL_SECONDS);
    row('refresh', refreshToken, this.#config.OAUTH_SERVER_REFRESH_TOKEN_TTL_SECONDS);
    return {
      access_token: accessToken,
      token_type: 'Bearer',
      expires_in: this.#config.OAUTH_SERVER_ACCESS_TOKEN_TTL_SECONDS,
      refresh_token: refreshToken,
    };
  }

  /** RFC 7009: a refresh token ends its grant, an access token itself; an unknown token is not an error. */
  async revoke(form: URLSearchParams): Promise<void> {
    refuseRepeated(form);
    const token = form.get('token');
    if (!token) throw new OAuthError('invalid_request', 'token is missing');
    const tokenHash = sha256Hex(token);
    const [row] = await this.#db.execute<RowOf<OAuthToken, 'subscriptionId' | 'grantId' | 'kind'>>(
      'select subscription_id, grant_id, kind from oauth_server_token where token_hash = ?',
      [tokenHash],
    );
    if (!row) return;
    const grant = await this.#db.forkEm(row.subscription_id).findOne(OAuthGrant, { id: row.grant_id });
    const clientId = form.get('client_id');
    if (grant && clientId !== null && clientId !== grant.clientId) throw new OAuthError('invalid_client', 'The token was issued to another client', 401);
    if (row.kind === 'refresh') return this.#revokeGrant(row.subscription_id, row.grant_id);
    await this.#db.execute('delete from oauth_server_token where subscription_id = ? and token_hash = ?', [row.subscription_id, tokenHash]);
    this.#cache.delete(tokenHash);
    await this.#credentials.changed({ grantId: row.grant_id });
  }

  async #revokeGrant(subscriptionId: string, grantId: string): Promise<void> {
    const em = this.#db.forkEm(subscriptionId);
    await em.nativeDelete(OAuthToken, { grantId });
    await em.nativeDelete(OAuthGrant, { id: grantId });
    await this.#credentials.changed({ grantId });
  }

  /** The apps the caller authorised. */
  async listApps(ctx: AuthenticatedContext): Promise<AppGrant[]> {
    return (await ctx.em.find(OAuthGrant, { userId: ctx.userId }, { orderBy: { createdAt: 'desc' } })).map(appOf);
  }

  async revokeApp(ctx: AuthenticatedContext, id: string): Promise<{ success: true }> {
    const grant = await ctx.em.findOne(OAuthGrant, { id, userId: ctx.userId });
    if (!grant) throw notFound(`Authorised app ${id} not found`);
    await this.#revokeGrant(ctx.subscriptionId, id);
    return { success: true };
  }

  /** Every app authorised in the subscription, for its admins. */
  async listSubscriptionApps(ctx: AuthenticatedContext): Promise<AppGrant[]> {
    return (await ctx.em.find(OAuthGrant, {}, { orderBy: { createdAt: 'desc' } })).map(appOf);
  }

  async revokeSubscriptionApp(ctx: AuthenticatedContext, id: string): Promise<{ success: true }> {
    const grant = await ctx.em.findOne(OAuthGrant, { id });
    if (!grant) throw notFound(`Authorised app ${id} not found`);
    await this.#revokeGrant(ctx.subscriptionId, id);
    return { success: true };
  }

  /** A removed user's grants go in the same transaction (`auth.lifecycle`); the auth plugin then announces their credentials changed. */
  async removeAllOf(em: EntityManager, userId: string): Promise<void> {
    const grants = await em.find(OAuthGrant, { userId });
    if (grants.length === 0) return;
    await em.nativeDelete(OAuthToken, { grantId: { $in: grants.map((grant) => grant.id) } });
    await em.nativeDelete(OAuthGrant, { userId });
  }

  cached(token: string): Principal | undefined {
    const tokenHash = sha256Hex(token);
    const entry = this.#cache.get(tokenHash);
    if (!entry) return undefined;
    if (entry.expiresAt!.getTime() <= Date.now()) {
      this.#cache.delete(tokenHash);
      throw unauthenticated('The access token has expired; refresh it');
    }
    return entry.principal;
  }

  async authenticate(token: string): Promise<Principal> {
    return this.cached(token) ?? this.#load(token);
  }

  async #load(token: string): Promise<Principal> {
    const tokenHash = sha256Hex(token);
    const readAt = this.#cache.generation;
    const [row] = await this.#db.execute<AccessRow>(
      `select t.subscription_id, t.grant_id, t.expires_at, g.user_id, g.scopes, g.read_only, g.door
       from oauth_server_token t join oauth_server_grant g on g.subscription_id = t.subscription_id and g.id = t.grant_id
       where t.token_hash = ? and t.kind = 'access'`,
      [tokenHash],
    );
    if (!row) throw unauthenticated('Invalid or revoked access token');
    const expiresAt = new Date(row.expires_at);
    if (expiresAt.getTime() <= Date.now()) throw unauthenticated('The access token has expired; refresh it');
    const holder = await this.#users.credentialHolder(row.subscription_id, row.user_id);
    if (!holder?.isActive) throw unauthenticated('The user who authorized this app is gone or deactivated');
    const scopes = row.scopes ?? null;
    const principal: Principal = {
      subscriptionId: row.subscription_id,
      userId: row.user_id,
      role: holder.role,
      apiKeyId: null,
      sessionId: null,
      initialContext: null,
      grant: { id: row.grant_id, door: row.door as Door },
      ...(scopes !== null || row.read_only ? { limits: { scopes, readOnly: row.read_only, perMinute: null } } : {}),
    };
    this.#cache.set(tokenHash, { principal, expiresAt, lastSeenAt: null }, readAt);
    return principal;
  }
}

const appOf = (grant: OAuthGrant): AppGrant => ({
  id: grant.id,
  userId: grant.userId,
  clientId: grant.clientId,
  clientName: grant.clientName,
  redirectHost: hostOf(grant.redirectUri),
  door: grant.door as Door,
  scopes: grant.scopes ?? null,
  readOnly: grant.readOnly,
  createdAt: grant.createdAt.toISOString(),
  refreshedAt: grant.refreshedAt.toISOString(),
});

/** The token answer, with `scope` when the grant has one (a grant of everything the role allows has none to name). */
const withScope = (tokens: Record<string, unknown>, scope: string) => (scope === '' ? tokens : { ...tokens, scope });

/** RFC 6749 section 3.2: a parameter of a request to the token endpoint is sent once. */
function refuseRepeated(form: URLSearchParams): void {
  const names = [...form.keys()];
  const repeated = names.find((name, index) => names.indexOf(name) !== index);
  if (repeated !== undefined) throw new OAuthError('invalid_request', `${repeated.slice(0, 50)} is given more than once`);
}

/** The redirect URI with the answer's parameters added to its query (RFC 6749 section 4.1.2; `iss` from RFC 9207). */
function redirectWith(redirectUri: string, params: Record<string, string | undefined>): string {
  const url = new URL(redirectUri);
  for (const [name, value] of Object.entries(params)) if (value !== undefined) url.searchParams.set(name, value);
  return url.href;
}
