import { badRequest, SESSION_COOKIE, type RouteContext, type Router, type RpcError } from 'rpc-service/plugin';
import type { AuthDeps } from './deps.ts';
import { JOIN_COOKIE, type JoinQuestion } from './join.service.ts';
import type { SignInOutcome } from './sign-in.service.ts';

const escapeHtml = (text: string) => text.replace(/[&<>"']/g, (char) => ({ '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' })[char]!);

function page(ctx: RouteContext, status: number, title: string, text: string, more = ''): void {
  ctx.status = status;
  ctx.type = 'text/html; charset=utf-8';
  ctx.set('Content-Security-Policy', "default-src 'none'; form-action 'self'");
  ctx.set('Cache-Control', 'no-store');
  ctx.body = `<!doctype html><html><head><meta charset="utf-8"><title>${escapeHtml(title)}</title></head><body><h1>${escapeHtml(title)}</h1><p>${escapeHtml(text)}</p>${more}</body></html>`;
}

/**
 * A browser opens these routes, so a refusal or failure is a page, with the
 * code and status the request pipeline gives it (an unexpected one logged
 * with its error id, which the page shows).
 */
const failurePage = (ctx: RouteContext, error: RpcError, errorId?: string) =>
  page(ctx, error.status, 'Login failed', errorId ? `Something went wrong; try again later (error id ${errorId})` : error.message);

/** Asks whether to join an account the person did not make; each answer is a form posted to `/auth/join`. */
function questionPage(ctx: RouteContext, question: Omit<JoinQuestion, 'status' | 'token' | 'expiresAt'>): void {
  const answer = (decision: 'join' | 'cancel', label: string) =>
    `<form method="post" action="/auth/join?decision=${decision}"><button type="submit">${escapeHtml(label)}</button></form>`;
  const from = question.provider ? `your ${question.provider} login signs` : 'codes sent to this address sign';
  page(
    ctx,
    200,
    'Join an existing account?',
    `An account with your address ${question.email} already exists: ${question.username} (${question.role}) in "${question.tenant}". ` +
      'It was not made by you signing in, and its owner never proved this address, so someone else may have made it: the administrators of ' +
      `"${question.tenant}" can see what you keep there. If you join, ${from} into it from now on, ` +
      'and the password, open sessions and API keys it has end.',
    answer('join', `Join "${question.tenant}"`) + answer('cancel', 'Cancel'),
  );
}

/**
 * `GET /auth/<provider>` sends the browser to the provider; `/auth/<provider>/callback` finishes the login, or asks first.
 * `GET /auth/join` shows the question a sign-in left in this browser (a code login's), `POST /auth/join` answers it.
 */
export function oauthRoutes(router: Router, { oauthService, authService, joinService, http }: AuthDeps): void {
  const baseUrl = (ctx: RouteContext) => http.baseUrl(ctx.req);
  // Sign-in doors, as AuthRpc's login operations are: each writes (a login's state, a session, a link).
  const browserRoute = { access: 'public', serves: 'AuthRpc', kind: 'write', answerError: failurePage } as const;

  const from = (ctx: RouteContext) => ({ clientIp: ctx.ip, userAgent: ctx.req.headers['user-agent']?.slice(0, 300) ?? null });

  // A sign-in a gate stopped (a second factor) goes on at the gate's page.
  const signedIn = (ctx: RouteContext, login: SignInOutcome) => {
    ctx.set('Cache-Control', 'no-store');
    if (login.status === 'handed-over') {
      return page(ctx, 200, 'Login complete', 'You are signed in. You can close this window and return to the application.');
    }
    if (login.status === 'challenged') return ctx.redirect(`${http.publicUrl ?? ''}${login.challenge.page}`);
    ctx.append('Set-Cookie', http.cookie(ctx.req, SESSION_COOKIE, login.token, { expires: new Date(login.expiresAt) }));
    ctx.redirect(`${http.publicUrl ?? ''}/`);
  };

  const questionToken = (ctx: RouteContext) => {
    const token = ctx.cookies.get(JOIN_COOKIE);
    if (!token) throw badRequest('This question is unknown or has expired; sign in again');
    return decodeURIComponent(token);
  };

  // Before /auth/:provider, which would take "join" for a provider's name (config.ts reserves it).
  router.get(
    '/auth/join',
    http.route({ ...browserRoute, kind: 'read' }, async ({ http: ctx }) => questionPage(ctx, await joinService.question(questionToken(ctx)))),
  );

  router.post(
    '/auth/join',
    http.route(browserRoute, async ({ http: ctx }) => {
      const decision = ctx.query.decision;
      if (decision !== 'join' && decision !== 'cancel') throw badRequest('Answer with decision=join or decision=cancel');
      const token = questionToken(ctx);
      ctx.append('Set-Cookie', http.cookie(ctx.req, JOIN_COOKIE, '', { maxAge: 0 }));
      const answer = await joinService.answer(token, decision === 'join');
      if (answer.status === 'join') {
        return signedIn(
          ctx,
          answer.via
            ? await oauthService.join(answer.user, answer.email, answer.via, from(ctx))
            : await authService.joinWithCode(answer.user, answer.email, from(ctx)),
        );
      }
      page(
        ctx,
        200,
        'Nothing was linked',
        `Nothing was linked. The address ${answer.email} stays with an account you did not join: ask its administrators to remove it, or sign in another way.` +
          (answer.external ? ' You can close this window.' : ''),
      );
    }),
  );

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
      const login = await oauthService.completeLogin(ctx.params.provider!, new URL(ctx.href), baseUrl(ctx), from(ctx));
      if (login.status !== 'question') return signedIn(ctx, login);
      ctx.append('Set-Cookie', http.cookie(ctx.req, JOIN_COOKIE, login.token, { expires: login.expiresAt }));
      questionPage(ctx, login);
    }),
  );
}
