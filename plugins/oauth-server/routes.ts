import { unsafeInputIssues, type Door, type RouteContext, type Router, type RpcError } from 'rpc-service/plugin';
import type { OAuthServerDeps } from './deps.ts';
import { OAuthError } from './oauth-error.ts';
import { DOOR_PATHS } from './oauth-server.service.ts';

/** The most an OAuth request body may hold: a form of a few tokens, or a client's registration. */
const BODY_LIMIT_BYTES = 16 * 1024;

const escapeHtml = (text: string) => text.replace(/[&<>"']/g, (char) => ({ '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' })[char]!);

/** An authorization the server cannot send back to the client (its identity or redirect URI in doubt) is told to the user instead. */
function refusalPage(http: RouteContext, status: number, text: string): void {
  http.status = status;
  http.type = 'text/html; charset=utf-8';
  http.set('Content-Security-Policy', "default-src 'none'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'");
  http.set('X-Frame-Options', 'DENY');
  http.set('Cache-Control', 'no-store');
  http.body = `<!doctype html><html><head><meta charset="utf-8"><title>Authorization refused</title></head><body><h1>Authorization refused</h1><p>${escapeHtml(text)}</p></body></html>`;
}

/** Refuses a parameter holding text a column cannot (a NUL, half a surrogate pair), as every operation's params are refused (core/base/input-guard.ts). */
function safe(params: URLSearchParams): URLSearchParams {
  for (const [name, value] of params) {
    const [unsafe] = unsafeInputIssues({ [name.slice(0, 50)]: value });
    if (unsafe) throw new OAuthError('invalid_request', `${unsafe.path} ${unsafe.message}`);
  }
  return params;
}

/** OAuth's own error shape (RFC 6749 section 5.2) for what the pipeline refuses, such as a rate limit (429 with Retry-After). */
function oauthAnswer(http: RouteContext, error: RpcError): void {
  const code = error.code === 'RATE_LIMITED' ? 'temporarily_unavailable' : error.status >= 500 ? 'server_error' : 'invalid_request';
  if (error.retryAfter !== undefined) http.set('Retry-After', String(error.retryAfter));
  http.status = error.status;
  http.set('Cache-Control', 'no-store');
  http.body = { error: code, error_description: error.message };
}

/** What the endpoints of a client's own fetch answer across origins: a browser-based MCP client reads them too (no cookie is involved). */
function allowAnyOrigin(http: RouteContext): void {
  http.set('Access-Control-Allow-Origin', '*');
  http.set('Access-Control-Allow-Headers', 'Authorization, Content-Type, MCP-Protocol-Version');
  http.set('Access-Control-Allow-Methods', 'GET, POST, OPTIONS');
  http.set('Access-Control-Max-Age', '600');
}

/**
 * The OAuth 2.1 endpoints (docs/decisions/0064-oauth-for-agents.md): metadata
 * (RFC 8414, RFC 9728 for each door), authorization, token, registration
 * (RFC 7591) and revocation (RFC 7009). The consent itself is the console's
 * page, which calls OAuthServerRpc as any client does.
 */
export function oauthServerRoutes(router: Router, { oauthServerService, clientDirectory, http }: OAuthServerDeps): void {
  const issuer = (ctx: RouteContext) => http.baseUrl(ctx.req);
  const metadata = { access: 'public', serves: null, kind: 'read' } as const;
  const endpoint = { access: 'public', serves: 'OAuthServerRpc', kind: 'write', answerError: oauthAnswer } as const;

  const json = (ctx: RouteContext, status: number, body: unknown) => {
    allowAnyOrigin(ctx);
    ctx.set('Cache-Control', 'no-store');
    ctx.status = status;
    ctx.body = body;
  };
  /** Runs an OAuth endpoint: its errors answered as OAuth says. */
  const oauth = async (ctx: RouteContext, work: () => Promise<void>) => {
    try {
      await work();
    } catch (error) {
      if (!(error instanceof OAuthError)) throw error;
      if (error.status === 401) ctx.set('WWW-Authenticate', 'Basic');
      json(ctx, error.status, error.body);
    }
  };
  const form = async (ctx: RouteContext): Promise<URLSearchParams> => {
    if (!ctx.is('application/x-www-form-urlencoded')) throw new OAuthError('invalid_request', 'The body must be application/x-www-form-urlencoded');
    return safe(new URLSearchParams(await http.readText(ctx.req, BODY_LIMIT_BYTES)));
  };

  router.get(
    '/.well-known/oauth-authorization-server',
    http.route(metadata, ({ http: ctx }) => json(ctx, 200, oauthServerService.serverMetadata(issuer(ctx)))),
  );
  for (const door of Object.keys(DOOR_PATHS) as Door[]) {
    router.get(
      `/.well-known/oauth-protected-resource${DOOR_PATHS[door]}`,
      http.route(metadata, ({ http: ctx }) => json(ctx, 200, oauthServerService.resourceMetadata(issuer(ctx), door))),
    );
  }

  router.get(
    '/oauth/authorize',
    http.route({ ...endpoint, answerError: (ctx, error) => refusalPage(ctx, error.status, error.message) }, async ({ http: ctx }) => {
      try {
        ctx.set('Cache-Control', 'no-store');
        ctx.redirect(await oauthServerService.authorize(safe(new URLSearchParams(ctx.querystring)), issuer(ctx), http.clientIp(ctx.req)));
      } catch (error) {
        if (!(error instanceof OAuthError)) throw error;
        refusalPage(ctx, 400, error.description);
      }
    }),
  );

  router.post(
    '/oauth/token',
    http.route(endpoint, ({ http: ctx }) => oauth(ctx, async () => json(ctx, 200, await oauthServerService.token(await form(ctx), issuer(ctx))))),
  );

  router.post(
    '/oauth/register',
    http.route(endpoint, ({ http: ctx }) =>
      oauth(ctx, async () => {
        if (!ctx.is('application/json')) throw new OAuthError('invalid_client_metadata', 'The body must be application/json');
        let body: unknown;
        try {
          body = JSON.parse(await http.readText(ctx.req, BODY_LIMIT_BYTES));
        } catch (error) {
          if (error instanceof SyntaxError) throw new OAuthError('invalid_client_metadata', 'The body is not valid JSON');
          throw error;
        }
        json(ctx, 201, await clientDirectory.register(body, http.clientIp(ctx.req)));
      }),
    ),
  );

  router.post(
    '/oauth/revoke',
    http.route(endpoint, ({ http: ctx }) =>
      oauth(ctx, async () => {
        await oauthServerService.revoke(await form(ctx));
        json(ctx, 200, {});
      }),
    ),
  );

  // CORS preflights of a browser-based client: what it may send, and nothing else.
  const preflight = http.route(metadata, ({ http: ctx }) => {
    allowAnyOrigin(ctx);
    ctx.status = 204;
  });
  for (const path of ['/.well-known/oauth-authorization-server', ...Object.values(DOOR_PATHS).map((p) => `/.well-known/oauth-protected-resource${p}`)]) {
    router.options(path, preflight);
  }
  for (const path of ['/oauth/token', '/oauth/register', '/oauth/revoke']) router.options(path, preflight);
}
