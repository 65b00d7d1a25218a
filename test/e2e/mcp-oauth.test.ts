import assert from 'node:assert/strict';
import { existsSync, mkdirSync } from 'node:fs';
import { createServer as createHttpServer, type Server } from 'node:http';
import { createServer as createHttpsServer } from 'node:https';
import type { AddressInfo } from 'node:net';
import { after, before, describe, it } from 'node:test';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { auth, UnauthorizedError, type OAuthClientProvider } from '@modelcontextprotocol/sdk/client/auth.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import type { OAuthClientInformationMixed, OAuthClientMetadata, OAuthTokens } from '@modelcontextprotocol/sdk/shared/auth.js';
import { chromium, type Browser, type Page } from 'playwright-core';
import { startTestApp, type TestApp } from '../support/harness.ts';
import { oauthPost } from '../support/oauth.ts';
import { makeCertificates } from '../support/tls.ts';
import { addUser } from '../support/users.ts';

/** Debian's chromium, installed by .ci/ensure-chromium.sh; playwright-core downloads no browser. */
const CHROMIUM = '/usr/bin/chromium';
const SCREENSHOTS = 'test-results/oauth';

/** What an MCP client keeps between runs (registration, verifier, tokens), in memory; the browser is told where to go by `authorizationUrl`. */
class TestClientProvider implements OAuthClientProvider {
  authorizationUrl?: URL;
  #information?: OAuthClientInformationMixed;
  #tokens?: OAuthTokens;
  #verifier = '';

  constructor(
    readonly redirectUrl: string,
    readonly clientMetadataUrl?: string,
  ) {}

  get clientMetadata(): OAuthClientMetadata {
    return {
      client_name: this.clientMetadataUrl ? 'Document client' : 'Registered client',
      redirect_uris: [this.redirectUrl],
      grant_types: ['authorization_code', 'refresh_token'],
      response_types: ['code'],
      token_endpoint_auth_method: 'none',
    };
  }
  clientInformation() {
    return this.#information;
  }
  saveClientInformation(information: OAuthClientInformationMixed) {
    this.#information = information;
  }
  tokens() {
    return this.#tokens;
  }
  saveTokens(tokens: OAuthTokens) {
    this.#tokens = tokens;
  }
  redirectToAuthorization(url: URL) {
    this.authorizationUrl = url;
  }
  saveCodeVerifier(verifier: string) {
    this.#verifier = verifier;
  }
  codeVerifier() {
    return this.#verifier;
  }
}

/**
 * An MCP client of the official SDK connecting from nothing, with the SDK's
 * own OAuth support: discovery from the 401, registration (by a Client ID
 * Metadata Document served over https, or dynamically), consent given in
 * headless Chromium by a signed-in user, the token, tools limited to what was
 * granted, a call, refresh, revocation and a reused refresh token.
 */
describe('MCP with OAuth: the official SDK client, from nothing', () => {
  let t: TestApp;
  let browser: Browser;
  let page: Page;
  let documents: Server;
  let callbacks: Server;
  let documentUrl: string;
  let redirectUrl: string;
  let user: Awaited<ReturnType<typeof addUser>>;
  /** The queries the apps' redirect URI received, in order. */
  const returned: URLSearchParams[] = [];

  const listen = (server: Server) => new Promise<number>((resolve) => server.listen(0, '127.0.0.1', () => resolve((server.address() as AddressInfo).port)));
  const mcpUrl = () => new URL(`${t.url}/mcp`);
  const connect = async (provider: TestClientProvider) => {
    const client = new Client({ name: 'oauth-test', version: '1.0.0' });
    await client.connect(new StreamableHTTPClientTransport(mcpUrl(), { authProvider: provider }));
    return client;
  };

  /** Opens the authorization URL in the browser, signs in if asked, unticks what it is told and allows; answers what came back to the app. */
  async function consent(
    provider: TestClientProvider,
    { untick = [], readOnly = false, screenshot }: { untick?: string[]; readOnly?: boolean; screenshot?: string },
  ) {
    assert.ok(provider.authorizationUrl, 'the SDK asked for the browser');
    const before = returned.length;
    await page.goto(provider.authorizationUrl.href);
    const heading = page.getByRole('heading', { level: 1, name: 'Authorize an app' });
    const signIn = page.getByRole('heading', { level: 1, name: 'Sign in' });
    await heading.or(signIn).waitFor();
    if (await signIn.isVisible()) {
      await page.getByLabel('E-mail or username').fill(user.username);
      await page.getByLabel('Password').fill(user.password);
      await page.getByRole('button', { name: 'Sign in' }).click();
      await heading.waitFor();
    }
    await page.getByRole('button', { name: /^Allow / }).waitFor();
    for (const scope of untick) await page.getByLabel(new RegExp(`^${scope}:`)).uncheck();
    if (readOnly) await page.getByLabel(/^Read only/).check();
    if (screenshot) await page.screenshot({ path: `${SCREENSHOTS}/${screenshot}`, fullPage: true });
    await page.getByRole('button', { name: /^Allow / }).click();
    await page.waitForURL((url) => url.href.startsWith(redirectUrl));
    assert.equal(returned.length, before + 1, 'the app heard back once');
    const answer = returned.at(-1)!;
    assert.equal(answer.get('iss'), t.url, 'the answer names the issuer (RFC 9207)');
    return answer.get('code')!;
  }

  before(async () => {
    mkdirSync(SCREENSHOTS, { recursive: true });
    const certificates = makeCertificates();
    // The client's metadata document, on https at a host the operator allows for them (localhost resolves to a loopback address, which the guard refuses otherwise).
    const https = createHttpsServer({ key: certificates.key, cert: certificates.cert }, (request, response) => {
      if (request.url !== '/client.json') return void response.writeHead(404).end();
      response.writeHead(200, { 'content-type': 'application/json' }).end(
        JSON.stringify({
          client_id: documentUrl,
          client_name: 'Document client',
          client_uri: 'https://client.example',
          redirect_uris: [redirectUrl],
          grant_types: ['authorization_code', 'refresh_token'],
          response_types: ['code'],
          token_endpoint_auth_method: 'none',
        }),
      );
    });
    documents = https;
    const documentPort = await listen(https);
    documentUrl = `https://localhost:${documentPort}/client.json`;
    callbacks = createHttpServer((request, response) => {
      const url = new URL(request.url!, 'http://127.0.0.1');
      // The browser asks for a favicon too: only the redirect URI is the app's answer.
      if (url.pathname !== '/callback') return void response.writeHead(404).end();
      returned.push(url.searchParams);
      response.writeHead(200, { 'content-type': 'text/plain' }).end('You can close this window.');
    });
    redirectUrl = `http://127.0.0.1:${await listen(callbacks)}/callback`;
    t = await startTestApp({
      plugins: ['auth', 'oauth-server', 'memory', 'console'],
      withNotes: false,
      env: { OAUTH_SERVER_CLIENT_DOCUMENT_HOSTS: `localhost:${documentPort}`, OUTBOUND_CA_FILE: certificates.caFile },
    });
    const admin = await t.signup();
    user = await addUser(t, admin.subscriptionId, 'user');
    assert.ok(existsSync(CHROMIUM), `${CHROMIUM} is missing: run .ci/ensure-chromium.sh`);
    browser = await chromium.launch({ executablePath: CHROMIUM, headless: true, args: ['--no-sandbox', '--disable-background-networking'] });
    const context = await browser.newContext();
    context.setDefaultTimeout(15_000);
    page = await context.newPage();
  });

  after(async () => {
    await browser?.close();
    await t?.close();
    documents?.close();
    callbacks?.close();
  });

  it('registers dynamically, is granted less than it asked, calls a tool, refreshes, and loses the grant when an old refresh token is reused', async () => {
    const provider = new TestClientProvider(redirectUrl);
    await assert.rejects(connect(provider), UnauthorizedError);
    assert.match(provider.clientInformation()!.client_id, /^oac_/, 'registered by RFC 7591');
    const asked = provider.authorizationUrl!.searchParams;
    assert.equal(asked.get('code_challenge_method'), 'S256');
    assert.equal(asked.get('resource'), `${t.url}/mcp`);
    assert.deepEqual(asked.get('scope')!.split(' ').sort(), ['AuthRpc', 'MemoryRpc', 'OAuthServerRpc']);

    const code = await consent(provider, { untick: ['AuthRpc', 'OAuthServerRpc'], screenshot: 'consent.png' });
    await new StreamableHTTPClientTransport(mcpUrl(), { authProvider: provider }).finishAuth(code);
    const first = provider.tokens()!;
    assert.equal(first.scope, 'MemoryRpc');
    const client = await connect(provider);
    const { tools } = await client.listTools();
    assert.ok(tools.length > 0);
    assert.deepEqual(
      tools.filter((tool) => !tool.name.startsWith('MemoryRpc_')).map((tool) => tool.name),
      [],
      'only the granted group',
    );
    const saved = await client.callTool({ name: 'MemoryRpc_saveMemory', arguments: { scope: 'user', memory: { content: 'Prefers tea in the morning' } } });
    assert.equal(saved.isError, undefined, JSON.stringify(saved));
    const memories = await t.as(user).MemoryRpc.listMemories({ scope: 'user' });
    assert.ok(JSON.stringify(memories).includes('Prefers tea in the morning'), 'written as the user who consented');

    // Refresh through the SDK: a new pair, the old refresh token ended.
    assert.equal(await auth(provider, { serverUrl: mcpUrl() }), 'AUTHORIZED');
    const second = provider.tokens()!;
    assert.notEqual(second.access_token, first.access_token);
    assert.notEqual(second.refresh_token, first.refresh_token);
    assert.ok((await client.listTools()).tools.length > 0, 'the new access token works');

    // The first refresh token again, as a thief would present it: refused, and the grant is gone with its tokens.
    const reused = await oauthPost(t, '/oauth/token', {
      grant_type: 'refresh_token',
      refresh_token: first.refresh_token!,
      client_id: provider.clientInformation()!.client_id,
    });
    assert.equal(reused.body.error, 'invalid_grant');
    const stale = await fetch(mcpUrl(), {
      method: 'POST',
      headers: { authorization: `Bearer ${second.access_token}`, 'content-type': 'application/json', accept: 'application/json, text/event-stream' },
      body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'tools/list' }),
    });
    assert.equal(stale.status, 401);
    assert.deepEqual(await t.as(user).OAuthServerRpc.listApps(), []);
  });

  it('names itself by its metadata document, is granted read-only, and stops at once when the user revokes it in the console', async () => {
    const provider = new TestClientProvider(redirectUrl, documentUrl);
    await assert.rejects(connect(provider), UnauthorizedError);
    assert.equal(provider.clientInformation()!.client_id, documentUrl, 'no registration: the document is the client id');
    assert.equal(provider.authorizationUrl!.searchParams.get('client_id'), documentUrl);
    const code = await consent(provider, { readOnly: true });
    await new StreamableHTTPClientTransport(mcpUrl(), { authProvider: provider }).finishAuth(code);
    const client = await connect(provider);
    const { tools } = await client.listTools();
    assert.ok(tools.some((tool) => tool.name === 'MemoryRpc_listMemories'));
    assert.deepEqual(
      tools.filter((tool) => !tool.annotations?.readOnlyHint).map((tool) => tool.name),
      [],
      'read-only: no tool that changes anything',
    );

    await page.goto(`${t.url}/console#/apps`);
    const row = page.getByRole('row').filter({ hasText: 'Document client' });
    await row.waitFor();
    page.once('dialog', (dialog) => void dialog.accept());
    await row.getByRole('button', { name: 'Revoke' }).click();
    await page.getByText('No app is authorised.').waitFor();
    const stale = await fetch(mcpUrl(), {
      method: 'POST',
      headers: {
        authorization: `Bearer ${provider.tokens()!.access_token}`,
        'content-type': 'application/json',
        accept: 'application/json, text/event-stream',
      },
      body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'tools/list' }),
    });
    assert.equal(stale.status, 401);
    const refresh = await oauthPost(t, '/oauth/token', {
      grant_type: 'refresh_token',
      refresh_token: provider.tokens()!.refresh_token!,
      client_id: documentUrl,
    });
    assert.equal(refresh.body.error, 'invalid_grant');
  });
});
