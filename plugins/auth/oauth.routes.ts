import { SESSION_COOKIE, type RouteContext, type Router, type RpcError } from 'rpc-service/plugin';
import type { AuthDeps } from './deps.ts';

const escapeHtml = (text: string) => text.replace(/[&<>"']/g, (char) => ({ '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' })[char]!);

function page(ctx: RouteContext, status: number, title: string, text: string): void {
  ctx.status = status;
  ctx.type = 'text/html; charset=utf-8';
  ctx.set('Content-Security-Policy', "default-src 'none'");
  ctx.set('Cache-Control', 'no-store');
  ctx.body = `<!doctype html><html><head><meta charset="utf-8"><title>${escapeHtml(title)}</title></head><body><h1>${escapeHtml(title)}</h1><p>${escapeHtml(text)}</p></body></html>`;
}

/**
 * A browser opens these routes, so a refusal or failure is a page, with the
 * code and status the request pipeline gives it (an unexpected one logged
 * with its error id, which the page shows).
 */
const failurePage = (ctx: RouteContext, error: RpcError, errorId?: string) =>
  page(ctx, error.status, 'Login failed', errorId ? `Something went wrong; try again later (error id ${errorId})` : error.message);

/** `GET /auth/<provider>` sends the browser to the provider; `/auth/<provider>/callback` finishes the login. */
export function oauthRoutes(router: Router, { oauthService, http }: AuthDeps): void {
  const baseUrl = (ctx: RouteContext) => http.baseUrl(ctx.req);
  const browserRoute = { access: 'public', answerError: failurePage } as const;

  router.get(
    '/auth/:provider',
    http.route(browserRoute, async ({ http: ctx }) => {
      const external = typeof ctx.query.external === 'string' ? ctx.query.external : undefined;
      ctx.set('Cache-Control', 'no-store');
      ctx.redirect(await oauthService.authorizationUrl(ctx.params.provider!, baseUrl(ctx), external));
    }),
  );

  router.get(
    '/auth/:provider/callback',
    http.route(browserRoute, async ({ http: ctx }) => {
      if (typeof ctx.query.error === 'string') {
        return page(ctx, 400, 'Login cancelled', `The provider answered: ${ctx.query.error}`);
      }
      const login = await oauthService.completeLogin(ctx.params.provider!, new URL(ctx.href), baseUrl(ctx));
      if (login.external) {
        return page(ctx, 200, 'Login complete', 'You are signed in. You can close this window and return to the application.');
      }
      ctx.append('Set-Cookie', http.cookie(ctx.req, SESSION_COOKIE, login.token, { expires: login.expiresAt }));
      ctx.set('Cache-Control', 'no-store');
      ctx.redirect(`${http.publicUrl ?? ''}/`);
    }),
  );
}
