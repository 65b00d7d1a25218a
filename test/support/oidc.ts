import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import Provider from 'oidc-provider';

export interface TestAccount {
  email?: string;
  emailVerified?: boolean;
  givenName?: string;
}

/**
 * A real OpenID provider (oidc-provider) on loopback. Its port is known before
 * the client exists, so the app can be configured first; `configure` then
 * registers the client with the app's callback URL.
 */
/** The settings that make the app sign in with the provider as `acme`, the client the provider registers. */
export const acmeProviderEnv = (issuer: string): Record<string, string> => ({
  OAUTH_PROVIDERS: 'acme',
  OAUTH_ACME_ISSUER: issuer,
  OAUTH_ACME_CLIENT_ID: 'rpc-service',
  OAUTH_ACME_CLIENT_SECRET: 'test-client-secret',
  OAUTH_ALLOW_HTTP: 'true',
});

export async function startOpenIdProvider() {
  let handler: (req: IncomingMessage, res: ServerResponse) => void = (_req, res) => res.writeHead(503).end();
  const server = createServer((req, res) => handler(req, res));
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const issuer = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  const accounts = new Map<string, TestAccount>();

  return {
    issuer,
    accounts,
    configure(redirectUris: string[]) {
      const provider = new Provider(issuer, {
        clients: [
          {
            client_id: 'rpc-service',
            client_secret: 'test-client-secret',
            redirect_uris: redirectUris,
            response_types: ['code'],
            grant_types: ['authorization_code'],
          },
        ],
        claims: { openid: ['sub'], email: ['email', 'email_verified'], profile: ['given_name'] },
        scopes: ['openid', 'email', 'profile'],
        pkce: { required: () => true },
        cookies: { keys: ['oidc-test-cookie-key'] },
        async findAccount(_ctx, sub) {
          const account = accounts.get(sub) ?? {};
          return {
            accountId: sub,
            claims: async () => ({ sub, email: account.email, email_verified: account.emailVerified ?? true, given_name: account.givenName }),
          };
        },
      });
      handler = provider.callback();
    },
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
}

/** A browser that keeps cookies per host and follows redirects by hand, so each hop can be inspected. */
export class TestBrowser {
  readonly #cookies = new Map<string, Map<string, string>>();

  async get(url: string): Promise<Response> {
    return this.#request(url, { method: 'GET' });
  }

  async post(url: string, form: Record<string, string>): Promise<Response> {
    return this.#request(url, { method: 'POST', body: new URLSearchParams(form), headers: { 'content-type': 'application/x-www-form-urlencoded' } });
  }

  async #request(url: string, init: RequestInit): Promise<Response> {
    const host = new URL(url).host;
    const jar = this.#cookies.get(host) ?? new Map<string, string>();
    this.#cookies.set(host, jar);
    const cookie = [...jar].map(([name, value]) => `${name}=${value}`).join('; ');
    const response = await fetch(url, { ...init, redirect: 'manual', headers: { ...(init.headers as Record<string, string>), ...(cookie ? { cookie } : {}) } });
    for (const line of response.headers.getSetCookie()) {
      const [pair] = line.split(';');
      const eq = pair!.indexOf('=');
      jar.set(pair!.slice(0, eq).trim(), pair!.slice(eq + 1).trim());
    }
    return response;
  }

  cookie(host: string, name: string): string | undefined {
    return this.#cookies.get(host)?.get(name);
  }

  /**
   * Follows redirects from `url`, logging in as `accountId` and giving consent
   * on the provider's pages, until a response is not a redirect to the
   * provider. Returns that last response (usually the app's callback answer).
   */
  async signInAt(url: string, accountId: string, providerOrigin: string): Promise<Response> {
    let response = await this.get(url);
    for (let hop = 0; hop < 20; hop++) {
      const location = response.headers.get('location');
      if (location) {
        const next = new URL(location, response.url || url).toString();
        response = await this.get(next);
        if (!next.startsWith(providerOrigin)) return response;
        continue;
      }
      const html = await response.text();
      const action = /<form[^>]*action="([^"]+)"/.exec(html)?.[1];
      if (!action || !response.url.startsWith(providerOrigin)) return new Response(html, { status: response.status, headers: response.headers });
      const target = new URL(action, response.url).toString();
      response = html.includes('name="login"')
        ? await this.post(target, { prompt: 'login', login: accountId, password: 'any' })
        : await this.post(target, { prompt: 'consent' });
    }
    throw new Error('too many redirects');
  }
}
