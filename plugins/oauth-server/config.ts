import * as v from 'valibot';
import { env, setting, settings } from 'rpc-service/plugin';

export const oauthServerSettings = settings({
  OAUTH_SERVER_ACCESS_TOKEN_TTL_SECONDS: setting(env.integer(60, 86_400), 'how long an access token issued to an app is valid', '900'),
  OAUTH_SERVER_REFRESH_TOKEN_TTL_SECONDS: setting(
    env.integer(300, 365 * 86_400),
    "how long an app's refresh token is valid; each refresh issues a new one and ends the old",
    String(30 * 86_400),
  ),
  OAUTH_SERVER_REGISTRATION_IP_LIMIT: setting(env.integer(1, 100_000), 'client registrations (RFC 7591) from one address an hour', '30'),
  OAUTH_SERVER_CLIENT_DOCUMENT_HOSTS: setting(
    v.string(),
    'comma-separated hosts (name or name:port) client metadata documents may be fetched from whatever they resolve to; any other host must be a public address',
    '',
  ),
  OAUTH_SERVER_AUTHORIZE_IP_LIMIT: setting(
    env.integer(1, 100_000),
    'authorization requests from one address a minute (each may fetch a client metadata document)',
    '60',
  ),
});

export type OAuthServerConfig = v.InferOutput<typeof oauthServerSettings>;
