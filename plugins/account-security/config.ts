import * as v from 'valibot';
import { env, setting, settings } from 'rpc-service/plugin';

export const accountSecuritySettings = settings({
  ACCOUNT_SECURITY_RP_NAME: setting(
    v.pipe(v.string(), v.minLength(1), v.maxLength(64)),
    'the name passkey prompts and authenticator apps show for this service',
    'RPC Service',
  ),
  ACCOUNT_SECURITY_TICKET_TTL_SECONDS: setting(
    env.integer(60, 3600),
    'how long a sign-in stopped for a second factor (or for enrolling one) may be finished',
    '600',
  ),
  ACCOUNT_SECURITY_FAILURE_LIMIT: setting(
    env.integer(1, 1000),
    'wrong second-factor codes (authenticator or recovery) one user may give in a window before every code is refused',
    '5',
  ),
  ACCOUNT_SECURITY_PASSKEY_SIGN_IN_IP_LIMIT: setting(
    env.integer(1, 100_000),
    'passkey sign-ins without a username one client address may begin a minute (each stores a challenge)',
    '60',
  ),
  ACCOUNT_SECURITY_FAILURE_WINDOW_SECONDS: setting(env.integer(60, 86_400), 'the window wrong second-factor codes are counted in', '900'),
});

export type AccountSecurityConfig = v.InferOutput<typeof accountSecuritySettings>;
