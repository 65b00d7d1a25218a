import { RpcError, SESSION_COOKIE, type RouteContext, type Router } from 'rpc-service/plugin';
import type { AuthDeps } from './deps.ts';

const escapeHtml = (text: string) => text.replace(/[&<>"']/g, (char) => ({ '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' })[char]!);

function page(ctx: RouteContext, status: number, title: string, text: string): void {
  ctx.status = status;
  ctx.type = 'text/html; charset=utf-8';
  ctx.set('Content-Security-Policy', "default-src 'none'");
  ctx.set('Cache-Control', 'no-store');
  ctx.body = `<!doctype html><html><head><meta charset="utf-8"><title>${escapeHtml(title)}</title></head><body><h1>${escapeHtml(title)}</h1><p>${escapeHtml(text)}</p></body></html>`;
}

/** `GET /auth/<provider>` sends the browser to the provider; `/auth/<provider>/callback` finishes the login. */
export function oauthRoutes(router: Router, { oauthService, http, logger }: AuthDeps): void {
  const baseUrl = (ctx: RouteContext) => http.baseUrl(ctx.req);

  const failed = (ctx: RouteContext, error: unknown) => {
    if (error instanceof RpcError) return page(ctx, error.status, 'Login failed', error.message);
    logger.error({ err: error }, 'OAuth login failed');
    page(ctx, 500, 'Login failed', 'Something went wrong; try again later');
  };

  router.get('/auth/:provider', async (ctx) => {
    try {
      const external = typeof ctx.query.external === 'string' ? ctx.query.external : undefined;
      ctx.set('Cache-Control', 'no-store');
      ctx.redirect(await oauthService.authorizationUrl(ctx.params.provider!, baseUrl(ctx), external));
    } catch (error) {
      failed(ctx, error);
    }
  });

  router.get('/auth/:provider/callback', async (ctx) => {
    try {
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
    } catch (error) {
      failed(ctx, error);
    }
  });
}
