import * as v from 'valibot';
import { recordId } from 'rpc-service/plugin';
import { defineJob, defineOperation } from './deps.ts';
import { APP_GRANT, CONSENT } from './oauth-server.service.ts';

/** The id in the consent page's address (`#/authorize/<request>`). */
const request = v.pipe(v.string('request must be a string'), v.regex(/^[A-Za-z0-9_-]{43}$/, 'request is the id in the consent page address'));

const REDIRECT = v.strictObject({ redirectTo: v.string() });
const DONE = v.strictObject({ success: v.literal(true) });

export const getConsent = defineOperation({
  access: 'user',
  kind: 'read',
  describe: 'What an app asks to be allowed (its name, where it returns, the door and scopes): what the consent page shows a signed-in user.',
  params: v.object({ request }),
  result: CONSENT,
  handler: ({ params, ctx, deps }) => deps.oauthServerService.getConsent(ctx, params.request),
});

export const approveConsent = defineOperation({
  access: 'user',
  kind: 'write',
  describe:
    'Authorise the app of a consent page, with what it asked or less (some of its scopes, read-only); answers the address to send the browser back to, with the code.',
  params: v.object({
    request,
    scopes: v.nullable(
      v.pipe(v.array(v.string('each scope must be a string')), v.minLength(1, 'scopes must name at least one (null: all asked)'), v.maxLength(200)),
    ),
    readOnly: v.boolean('readOnly must be a boolean'),
  }),
  result: REDIRECT,
  handler: ({ params, ctx, deps }) => deps.oauthServerService.approveConsent(ctx, params.request, { scopes: params.scopes, readOnly: params.readOnly }),
});

export const denyConsent = defineOperation({
  access: 'user',
  kind: 'write',
  describe: "Refuse the app of a consent page; answers the address to send the browser back to, with the app's access_denied.",
  params: v.object({ request }),
  result: REDIRECT,
  handler: ({ params, ctx, deps }) => deps.oauthServerService.denyConsent(ctx, params.request),
});

export const listApps = defineOperation({
  access: 'user',
  kind: 'read',
  describe: 'The apps the caller authorised (OAuth grants): each app, its door, scopes and when it last refreshed.',
  params: v.object({}),
  result: v.array(APP_GRANT),
  handler: ({ ctx, deps }) => deps.oauthServerService.listApps(ctx),
});

export const revokeApp = defineOperation({
  access: 'user',
  kind: 'write',
  describe: 'Revoke an app the caller authorised: its access and refresh tokens stop working at once on every node.',
  params: v.object({ id: recordId('id') }),
  result: DONE,
  handler: ({ params, ctx, deps }) => deps.oauthServerService.revokeApp(ctx, params.id),
});

export const listSubscriptionApps = defineOperation({
  access: 'admin',
  kind: 'read',
  describe: 'Every app authorised by a user of the subscription, with the user.',
  params: v.object({}),
  result: v.array(APP_GRANT),
  handler: ({ ctx, deps }) => deps.oauthServerService.listSubscriptionApps(ctx),
});

export const revokeSubscriptionApp = defineOperation({
  access: 'admin',
  kind: 'write',
  describe: 'Revoke an app any user of the subscription authorised: its tokens stop working at once.',
  params: v.object({ id: recordId('id') }),
  result: DONE,
  handler: ({ params, ctx, deps }) => deps.oauthServerService.revokeSubscriptionApp(ctx, params.id),
});

export const sweep = defineJob({
  describe: 'Deletes what is over: expired authorization requests and tokens, grants with no token left, clients a day old that nobody authorised.',
  data: v.object({}),
  handler: ({ deps }) => deps.oauthServerService.sweep(),
  schedule: '17 * * * *',
});
