import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { after, before, describe, it } from 'node:test';
import WebSocket from 'ws';
import { refused } from '../../../test/support/caller.ts';
import { startTestApp, type Session, type TestApp } from '../../../test/support/harness.ts';
import { authorizeApp, oauthPost, pkce, registerClient } from '../../../test/support/oauth.ts';
import { addUser } from '../../../test/support/users.ts';

/** What an MCP client's first request is. */
const LIST_TOOLS = JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'tools/list' });

/** The OAuth 2.1 server's refusals, and how its tokens are held at each door (the MCP SDK and the consent page: test/e2e/mcp-oauth.test.ts). */
describe('OAuthServerRpc: tokens, doors and refusals', () => {
  let t: TestApp;
  let admin: Session;

  const mcp = (token?: string) =>
    fetch(`${t.url}/mcp`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', accept: 'application/json, text/event-stream', ...(token ? { authorization: `Bearer ${token}` } : {}) },
      body: LIST_TOOLS,
    });
  const api = (token: string, method: string, params: Record<string, unknown> = {}) =>
    fetch(`${t.url}/api/rpc`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', authorization: `Bearer ${token}` },
      body: JSON.stringify({ method, params }),
    });
  const authorizeQuery = (clientId: string, redirectUri: string, more: Record<string, string> = {}) =>
    new URLSearchParams({
      response_type: 'code',
      client_id: clientId,
      redirect_uri: redirectUri,
      code_challenge: pkce().challenge,
      code_challenge_method: 'S256',
      resource: `${t.url}/mcp`,
      ...more,
    });
  const pendingRequests = async () => (await t.app.deps.db.execute<{ n: number }>('select count(*)::int as n from oauth_server_authorization'))[0]!.n;

  before(async () => {
    t = await startTestApp({ plugins: ['auth', 'admin-user', 'api-key', 'oauth-server', 'memory'], withNotes: false });
    admin = await t.signup();
  });
  after(() => t?.close());

  it('describes itself: the MCP door answers 401 naming its resource metadata, which names this server', async () => {
    const answer = await mcp();
    assert.equal(answer.status, 401);
    assert.equal(answer.headers.get('www-authenticate'), `Bearer resource_metadata="${t.url}/.well-known/oauth-protected-resource/mcp"`);
    const resource = await (await fetch(`${t.url}/.well-known/oauth-protected-resource/mcp`)).json();
    assert.equal(resource.resource, `${t.url}/mcp`);
    assert.deepEqual(resource.authorization_servers, [t.url]);
    assert.ok(resource.scopes_supported.includes('MemoryRpc'));
    assert.equal(resource.scopes_supported.includes('read-only'), false, 'a client naming no scope must not end up read-only');
    assert.equal((await (await fetch(`${t.url}/.well-known/oauth-protected-resource/api/rpc`)).json()).resource, `${t.url}/api/rpc`);
    const server = await (await fetch(`${t.url}/.well-known/oauth-authorization-server`)).json();
    assert.equal(server.issuer, t.url);
    assert.deepEqual(server.code_challenge_methods_supported, ['S256']);
    assert.equal(server.client_id_metadata_document_supported, true);
    assert.equal(server.authorization_response_iss_parameter_supported, true);
    assert.equal(server.token_endpoint, `${t.url}/oauth/token`);
  });

  it('binds a token to its door: an MCP token is refused at the API and an API token at MCP', async () => {
    const forMcp = await authorizeApp(t, admin, { door: 'mcp', scope: 'MemoryRpc' });
    const forApi = await authorizeApp(t, admin, { door: 'api', scope: 'MemoryRpc' });
    assert.equal((await mcp(forMcp.accessToken)).status, 200);
    const wrongDoor = await mcp(forApi.accessToken);
    assert.equal(wrongDoor.status, 401);
    assert.match(wrongDoor.headers.get('www-authenticate')!, /error="invalid_token"/);
    assert.equal((await api(forApi.accessToken, 'MemoryRpc.listMemories', { scope: 'user' })).status, 200);
    const refusedAtApi = await api(forMcp.accessToken, 'MemoryRpc.listMemories', { scope: 'user' });
    assert.equal(refusedAtApi.status, 401);
    assert.match((await refusedAtApi.json()).data.error, /issued for the MCP door/);
    // A token for the API opens its WebSocket too; one for MCP does not.
    const open = (token: string) =>
      new Promise<number>((resolve) => {
        const socket = new WebSocket(`${t.url.replace('http', 'ws')}/ws`, { headers: { authorization: `Bearer ${token}` } });
        socket.once('open', () => (socket.close(), resolve(101)));
        socket.once('unexpected-response', (_request, response) => resolve(response.statusCode!));
      });
    assert.equal(await open(forApi.accessToken), 101);
    assert.equal(await open(forMcp.accessToken), 401);
  });

  it('holds a token to what was granted: its scopes and read-only, at every door, and no key wider than itself', async () => {
    const app = await authorizeApp(t, admin, { scope: 'MemoryRpc ApiKeyRpc', grant: { scopes: ['MemoryRpc', 'ApiKeyRpc'], readOnly: true } });
    const caller = t.as({ accessToken: app.accessToken });
    await caller.MemoryRpc.listMemories({ scope: 'user' });
    assert.match((await refused(caller.MemoryRpc.saveMemory({ scope: 'user', memory: { content: 'not allowed' } }), 'FORBIDDEN')).message, /read-only/);
    assert.match((await refused(caller.AuthRpc.getSession(), 'FORBIDDEN')).message, /may not call AuthRpc.getSession/);
    // A key made by an app would outlive the app's revocation: apps make none (nor anything else that needs a person present).
    const writer = t.as({ accessToken: (await authorizeApp(t, admin)).accessToken });
    assert.match((await refused(writer.ApiKeyRpc.create({ description: 'wider' }), 'STEP_UP_REQUIRED')).message, /an app's token stands for nobody/);
    const key = await t.as(admin).ApiKeyRpc.create({ description: 'made in a session' });
    await refused(writer.ApiKeyRpc.update({ _id: key._id, scopes: null }), 'FORBIDDEN');
  });

  it('lets the user grant less than asked, never more', async () => {
    const redirectUri = 'http://127.0.0.1:9/callback';
    const clientId = await registerClient(t, redirectUri);
    const location = (
      await fetch(`${t.url}/oauth/authorize?${authorizeQuery(clientId, redirectUri, { scope: 'MemoryRpc.listMemories' })}`, { redirect: 'manual' })
    ).headers.get('location')!;
    const request = location.split('/authorize/')[1]!;
    assert.match(
      (await refused(t.as(admin).OAuthServerRpc.approveConsent({ request, scopes: ['MemoryRpc'], readOnly: false }), 'FORBIDDEN')).message,
      /only narrow/,
    );
    assert.match((await refused(t.as(admin).OAuthServerRpc.approveConsent({ request, scopes: null, readOnly: false }), 'FORBIDDEN')).message, /only narrow/);
    // Consent is given in a browser session: an API key (or an app's token) may not give it.
    const key = await t.as(admin).ApiKeyRpc.create({ description: 'no consent' });
    assert.match((await refused(t.as({ apiKey: key.fullKey }).OAuthServerRpc.getConsent({ request }), 'FORBIDDEN')).message, /browser session/);
    const { redirectTo } = await t.as(admin).OAuthServerRpc.approveConsent({ request, scopes: ['MemoryRpc.listMemories'], readOnly: true });
    assert.equal(new URL(redirectTo).searchParams.get('iss'), t.url);
    await refused(t.as(admin).OAuthServerRpc.approveConsent({ request, scopes: null, readOnly: true }), 'CONFLICT');
  });

  it('refuses an expired token, a revoked one, and every token of a revoked app or a deactivated user', async () => {
    const expiring = await authorizeApp(t, admin);
    const tokenHash = createHash('sha256').update(expiring.accessToken).digest('hex');
    await t.app.deps.db.execute("update oauth_server_token set expires_at = now() - interval '1 second' where token_hash = ?", [tokenHash]);
    const expired = await api(expiring.accessToken, 'MemoryRpc.listMemories', { scope: 'user' });
    assert.equal(expired.status, 401);
    assert.match((await expired.json()).data.error, /expired/);

    const revoked = await authorizeApp(t, admin);
    assert.equal((await api(revoked.accessToken, 'MemoryRpc.listMemories', { scope: 'user' })).status, 200);
    assert.equal((await oauthPost(t, '/oauth/revoke', { token: revoked.accessToken, client_id: revoked.clientId })).status, 200);
    assert.equal((await api(revoked.accessToken, 'MemoryRpc.listMemories', { scope: 'user' })).status, 401);
    // Revoking the refresh token ends the grant: the refresh is refused.
    assert.equal((await oauthPost(t, '/oauth/revoke', { token: revoked.refreshToken })).status, 200);
    const refresh = await oauthPost(t, '/oauth/token', { grant_type: 'refresh_token', refresh_token: revoked.refreshToken, client_id: revoked.clientId });
    assert.equal(refresh.body.error, 'invalid_grant');

    const listed = await authorizeApp(t, admin);
    assert.equal((await api(listed.accessToken, 'MemoryRpc.listMemories', { scope: 'user' })).status, 200);
    const [newest] = await t.as(admin).OAuthServerRpc.listApps();
    assert.equal(newest!.clientId, listed.clientId);
    await t.as(admin).OAuthServerRpc.revokeApp({ id: newest!.id });
    assert.equal((await api(listed.accessToken, 'MemoryRpc.listMemories', { scope: 'user' })).status, 401);

    const member = await addUser(t, admin.subscriptionId, 'user');
    const theirs = await authorizeApp(t, member);
    assert.equal((await api(theirs.accessToken, 'MemoryRpc.listMemories', { scope: 'user' })).status, 200);
    const apps = await t.as(admin).OAuthServerRpc.listSubscriptionApps();
    assert.ok(
      apps.some((app) => app.userId === member.user._id && app.clientId === theirs.clientId),
      'the admin sees the member’s app',
    );
    await t.as(admin).AdminUserRpc.update({ _id: member.user._id, isActive: false });
    assert.equal((await api(theirs.accessToken, 'MemoryRpc.listMemories', { scope: 'user' })).status, 401);
  });

  it('rotates refresh tokens, and a reused one revokes the grant', async () => {
    const app = await authorizeApp(t, admin);
    const first = await oauthPost(t, '/oauth/token', { grant_type: 'refresh_token', refresh_token: app.refreshToken, client_id: app.clientId });
    assert.equal(first.status, 200);
    assert.notEqual(first.body.refresh_token, app.refreshToken);
    assert.equal((await api(first.body.access_token, 'MemoryRpc.listMemories', { scope: 'user' })).status, 200);
    const reused = await oauthPost(t, '/oauth/token', { grant_type: 'refresh_token', refresh_token: app.refreshToken, client_id: app.clientId });
    assert.equal(reused.status, 400);
    assert.equal(reused.body.error, 'invalid_grant');
    assert.equal((await api(first.body.access_token, 'MemoryRpc.listMemories', { scope: 'user' })).status, 401, 'the grant is revoked with the tokens it had');
    const next = await oauthPost(t, '/oauth/token', { grant_type: 'refresh_token', refresh_token: first.body.refresh_token, client_id: app.clientId });
    assert.equal(next.body.error, 'invalid_grant');
  });

  it('uses up no refresh token on a refresh refused for its params, and sees any used one again, however many rotations later', async () => {
    const app = await authorizeApp(t, admin);
    const refresh = (token: string, more: Record<string, string> = {}) =>
      oauthPost(t, '/oauth/token', { grant_type: 'refresh_token', refresh_token: token, client_id: app.clientId, ...more });
    assert.equal((await refresh(app.refreshToken, { resource: 'https://elsewhere.example/api/rpc' })).body.error, 'invalid_target');
    assert.equal((await refresh(app.refreshToken, { scope: 'NoSuchRpc' })).body.error, 'invalid_scope');
    const second = await refresh(app.refreshToken);
    assert.equal(second.status, 200, 'the refused refreshes used nothing up');
    const third = await refresh(second.body.refresh_token);
    assert.equal(third.status, 200);
    assert.equal(third.body.scope, undefined, 'a grant of everything the role allows names no scope');
    assert.equal((await refresh(app.refreshToken)).body.error, 'invalid_grant', 'the first token, two rotations later');
    assert.equal((await api(third.body.access_token, 'MemoryRpc.listMemories', { scope: 'user' })).status, 401, 'the grant went with it');
    assert.equal((await refresh(third.body.refresh_token)).body.error, 'invalid_grant');
  });

  it('refuses a repeated parameter, and text no column can hold, without an error of its own', async () => {
    const app = await authorizeApp(t, admin);
    const repeated = await fetch(`${t.url}/oauth/token`, {
      method: 'POST',
      body: `grant_type=refresh_token&refresh_token=${app.refreshToken}&refresh_token=${app.refreshToken}&client_id=${app.clientId}`,
      headers: { 'content-type': 'application/x-www-form-urlencoded' },
    });
    assert.equal(repeated.status, 400);
    assert.equal((await repeated.json()).error, 'invalid_request');
    const clientId = await registerClient(t, 'http://127.0.0.1:9/callback');
    const nul = await fetch(`${t.url}/oauth/authorize?${authorizeQuery(clientId, 'http://127.0.0.1:9/callback', { state: 'a\u0000b' })}`, {
      redirect: 'manual',
    });
    assert.equal(nul.status, 400);
    assert.match(await nul.text(), /NUL/);
    const registered = await fetch(`${t.url}/oauth/register`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ client_name: 'bad\u0000name', redirect_uris: ['https://app.example/cb'] }),
    });
    assert.equal(registered.status, 400);
    assert.equal((await registered.json()).error, 'invalid_client_metadata');
  });

  it('sweeps what is over: expired requests and tokens, grants with no token left, clients nobody authorised', async () => {
    const app = await authorizeApp(t, admin);
    const unused = await registerClient(t, 'http://127.0.0.1:9/callback');
    const db = t.app.deps.db;
    await db.execute(
      "update oauth_server_token set expires_at = now() - interval '1 second' where grant_id in (select id from oauth_server_grant where client_id = ?)",
      [app.clientId],
    );
    await db.execute("update oauth_server_client set created_at = now() - interval '2 days' where id = ?", [unused]);
    const swept = await t.app.depsOf('oauth-server').oauthServerService.sweep();
    assert.ok(swept.tokens >= 2 && swept.grants >= 1 && swept.clients >= 1, JSON.stringify(swept));
    assert.deepEqual(await db.execute('select id from oauth_server_grant where client_id = ?', [app.clientId]), []);
    assert.deepEqual(await db.execute('select id from oauth_server_client where id = ?', [unused]), []);
    assert.equal((await db.execute('select id from oauth_server_client where id = ?', [app.clientId])).length, 1, 'a client someone authorised stays');
  });

  it('refuses a wrong PKCE verifier, another client, a reused code, and grants nothing', async () => {
    const redirectUri = 'http://127.0.0.1:9/callback';
    const clientId = await registerClient(t, redirectUri);
    const other = await registerClient(t, redirectUri);
    const { verifier, challenge } = pkce();
    const query = authorizeQuery(clientId, redirectUri, { code_challenge: challenge, resource: `${t.url}/api/rpc` });
    const request = (await fetch(`${t.url}/oauth/authorize?${query}`, { redirect: 'manual' })).headers.get('location')!.split('/authorize/')[1]!;
    const before = (await t.as(admin).OAuthServerRpc.listApps()).length;
    const { redirectTo } = await t.as(admin).OAuthServerRpc.approveConsent({ request, scopes: null, readOnly: false });
    const code = new URL(redirectTo).searchParams.get('code')!;
    const exchange = (more: Record<string, string>) =>
      oauthPost(t, '/oauth/token', {
        grant_type: 'authorization_code',
        code,
        code_verifier: verifier,
        client_id: clientId,
        redirect_uri: redirectUri,
        ...more,
      });
    assert.equal((await exchange({ code_verifier: pkce().verifier })).body.error, 'invalid_grant');
    assert.equal((await exchange({ client_id: other })).body.error, 'invalid_grant');
    assert.equal((await exchange({ redirect_uri: 'http://127.0.0.1:10/callback' })).body.error, 'invalid_grant');
    assert.equal((await exchange({ resource: `${t.url}/mcp` })).body.error, 'invalid_target');
    assert.equal((await t.as(admin).OAuthServerRpc.listApps()).length, before, 'nothing granted');
    const tokens = await exchange({});
    assert.equal(tokens.status, 200);
    assert.equal((await exchange({})).body.error, 'invalid_grant');
    assert.equal((await api(tokens.body.access_token, 'MemoryRpc.listMemories', { scope: 'user' })).status, 401, 'a code used twice takes back what it gave');
  });

  it('refuses on a page, never redirecting, a redirect URI not registered or a client document on a private address', async () => {
    const clientId = await registerClient(t, 'http://127.0.0.1:9/callback');
    const pending = await pendingRequests();
    const wrong = await fetch(`${t.url}/oauth/authorize?${authorizeQuery(clientId, 'https://attacker.example/steal')}`, { redirect: 'manual' });
    assert.equal(wrong.status, 400);
    assert.equal(wrong.headers.get('location'), null);
    assert.match(await wrong.text(), /not one of .* registered redirect URIs/);
    const privateDocument = await fetch(`${t.url}/oauth/authorize?${authorizeQuery('https://127.0.0.1:9/client.json', 'http://127.0.0.1:9/callback')}`, {
      redirect: 'manual',
    });
    assert.equal(privateDocument.status, 400);
    assert.equal(privateDocument.headers.get('location'), null);
    assert.match(await privateDocument.text(), /not a public address/);
    assert.equal(await pendingRequests(), pending, 'nothing kept');
    // With the client and its redirect known good, what else is wrong goes back to the client, with iss.
    const noPkce = await fetch(`${t.url}/oauth/authorize?${authorizeQuery(clientId, 'http://127.0.0.1:9/callback', { code_challenge_method: 'plain' })}`, {
      redirect: 'manual',
    });
    const back = new URL(noPkce.headers.get('location')!);
    assert.equal(back.searchParams.get('error'), 'invalid_request');
    assert.equal(back.searchParams.get('iss'), t.url);
    const otherResource = await fetch(
      `${t.url}/oauth/authorize?${authorizeQuery(clientId, 'http://127.0.0.1:9/callback', { resource: 'https://elsewhere.example/mcp' })}`,
      {
        redirect: 'manual',
      },
    );
    assert.equal(new URL(otherResource.headers.get('location')!).searchParams.get('error'), 'invalid_target');
    assert.equal(await pendingRequests(), pending, 'nothing kept');
  });

  it('registers only public clients with safe redirect URIs', async () => {
    const register = (body: Record<string, unknown>) =>
      fetch(`${t.url}/oauth/register`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) }).then(async (r) => ({
        status: r.status,
        body: await r.json(),
      }));
    assert.equal((await register({ redirect_uris: ['javascript:alert(1)'] })).body.error, 'invalid_redirect_uri');
    assert.equal((await register({ redirect_uris: ['http://app.example/callback'] })).body.error, 'invalid_redirect_uri');
    assert.equal((await register({ redirect_uris: ['https://app.example/cb#x'] })).body.error, 'invalid_redirect_uri');
    assert.equal(
      (await register({ redirect_uris: ['https://app.example/cb'], token_endpoint_auth_method: 'client_secret_basic' })).body.error,
      'invalid_client_metadata',
    );
    const ok = await register({ redirect_uris: ['https://app.example/cb', 'cursor://oauth/callback'], client_name: 'Editor' });
    assert.equal(ok.status, 201);
    assert.equal(ok.body.token_endpoint_auth_method, 'none');
    assert.equal(ok.body.client_secret, undefined);
  });
});
