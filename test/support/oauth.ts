import { createHash, randomBytes } from 'node:crypto';
import type { TestApp } from './harness.ts';
import type { Credential } from './caller.ts';

/** A PKCE pair (RFC 7636): the verifier the client keeps and its S256 challenge. */
export function pkce(): { verifier: string; challenge: string } {
  const verifier = randomBytes(32).toString('base64url');
  return { verifier, challenge: createHash('sha256').update(verifier).digest('base64url') };
}

/** A form POST to an OAuth endpoint, with its JSON answer. */
export async function oauthPost(t: TestApp, path: string, form: Record<string, string>): Promise<{ status: number; body: Record<string, any> }> {
  const response = await fetch(`${t.url}${path}`, { method: 'POST', body: new URLSearchParams(form) });
  return { status: response.status, body: await response.json() };
}

/** Registers a client (RFC 7591) with one redirect URI; its client_id. */
export async function registerClient(t: TestApp, redirectUri: string, name = 'Test app'): Promise<string> {
  const response = await fetch(`${t.url}/oauth/register`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ client_name: name, redirect_uris: [redirectUri], token_endpoint_auth_method: 'none' }),
  });
  const body = await response.json();
  if (response.status !== 201) throw new Error(`registration refused: ${JSON.stringify(body)}`);
  return body.client_id;
}

export interface AuthorizeOptions {
  door?: 'mcp' | 'api';
  /** The `scope` asked for; none asks for everything the role allows. */
  scope?: string;
  /** What the user grants; what was asked when absent. */
  grant?: { scopes: [string, ...string[]] | null; readOnly: boolean };
}

export interface AuthorizedApp {
  clientId: string;
  redirectUri: string;
  accessToken: string;
  refreshToken: string;
}

/**
 * An app authorised by `user` from nothing, the way an app does it over HTTP:
 * registration, the authorization request, the consent (given through the
 * operation the console's page calls, with the user's session), and the code
 * exchanged with its verifier.
 */
export async function authorizeApp(t: TestApp, user: Credential, options: AuthorizeOptions = {}): Promise<AuthorizedApp> {
  const door = options.door ?? 'api';
  const redirectUri = 'http://127.0.0.1:9/callback';
  const clientId = await registerClient(t, redirectUri);
  const { verifier, challenge } = pkce();
  const query = new URLSearchParams({
    response_type: 'code',
    client_id: clientId,
    redirect_uri: redirectUri,
    code_challenge: challenge,
    code_challenge_method: 'S256',
    state: 'test-state',
    resource: `${t.url}${door === 'mcp' ? '/mcp' : '/api/rpc'}`,
    ...(options.scope ? { scope: options.scope } : {}),
  });
  const location = (await fetch(`${t.url}/oauth/authorize?${query}`, { redirect: 'manual' })).headers.get('location') ?? '';
  const request = /#\/authorize\/([\w-]+)$/.exec(location)?.[1];
  if (!request) throw new Error(`no consent page: ${location}`);
  const consent = await t.as(user).OAuthServerRpc.getConsent({ request });
  const asked = consent.scopes.map(({ scope }) => scope) as [string, ...string[]];
  const grant = options.grant ?? { scopes: consent.everything ? null : asked, readOnly: consent.readOnly };
  const { redirectTo } = await t.as(user).OAuthServerRpc.approveConsent({ request, ...grant });
  const code = new URL(redirectTo).searchParams.get('code')!;
  const { status, body } = await oauthPost(t, '/oauth/token', {
    grant_type: 'authorization_code',
    code,
    code_verifier: verifier,
    client_id: clientId,
    redirect_uri: redirectUri,
    resource: query.get('resource')!,
  });
  if (status !== 200) throw new Error(`token refused: ${JSON.stringify(body)}`);
  return { clientId, redirectUri, accessToken: body.access_token, refreshToken: body.refresh_token };
}
