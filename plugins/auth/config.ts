import * as v from 'valibot';
import { env, setting, settings, splitList } from 'rpc-service/plugin';

const isRegex = (text: string): boolean => {
  try {
    new RegExp(text, 'i');
    return true;
  } catch {
    return false;
  }
};

export interface OAuthProviderConfig {
  /** The name in /auth/<name>, lower-case. */
  name: string;
  issuer: string;
  clientId: string;
  clientSecret: string;
  scopes: string;
}

/** Who may sign up: anyone, or holders of an invite code. */
export const SIGNUP_MODES = ['open', 'invite'] as const;

/** Issuers of the named presets; any other name needs OAUTH_<NAME>_ISSUER. */
export const OAUTH_PRESETS: Readonly<Record<string, string>> = {
  google: 'https://accounts.google.com',
  gitlab: 'https://gitlab.com',
  apple: 'https://appleid.apple.com',
};

/** A Twilio-style messaging API for SMS and WhatsApp (SMS_API_URL and the settings beside it). */
export interface SmsProviderConfig {
  /** Base URL of a Twilio-style REST API, e.g. https://api.twilio.com */
  apiUrl: string;
  accountSid: string;
  authToken: string;
  smsFrom?: string;
  whatsappFrom?: string;
}

/** Where one-time codes go (message-sender.ts); a channel with nothing configured writes to the outbox. */
export interface MessagingConfig {
  smtpUrl?: string;
  mailFrom: string;
  sms?: SmsProviderConfig;
}

const RESERVED_USERNAMES = 'admin,administrator,root,system,support,help,security,api,www,mail,postmaster,abuse,noreply,no-reply';

/**
 * The auth plugin's environment settings. OAuth providers also read
 * `OAUTH_<NAME>_CLIENT_ID`, `_CLIENT_SECRET`, `_ISSUER` and `_SCOPES` for each
 * name in OAUTH_PROVIDERS, hence the loose object.
 */
export const authSettings = v.pipe(
  v.looseObject(
    settings({
      SESSION_TTL_SECONDS: setting(env.integer(1, 365 * 24 * 3600), 'a session ends after this long without use', String(30 * 24 * 3600)),
      LOGIN_FAILURE_LIMIT: setting(
        env.integer(1, 100_000),
        'failed logins to one account from one client address in a window; also failed changePassword attempts per user',
        '10',
      ),
      LOGIN_ACCOUNT_FAILURE_LIMIT: setting(
        env.integer(1, 100_000),
        'failed logins to one account from all client addresses in a window; past it the account is refused from addresses it never logged in from',
        '100',
      ),
      LOGIN_IP_FAILURE_LIMIT: setting(
        env.integer(1, 100_000),
        'failed logins from one client address to all accounts in a window; past it the address is refused for accounts that never logged in from it',
        '30',
      ),
      LOGIN_FAILURE_WINDOW_SECONDS: setting(env.integer(1, 86_400), 'the window of the login limits', '900'),
      SIGNUP_MODE: setting(env.oneOf(SIGNUP_MODES), 'open: anyone signs up; invite: an invite code is needed', 'open'),
      SIGNUP_REQUIRE_EMAIL_VERIFICATION: setting(env.boolean(), 'signup needs a code sent to the e-mail address', 'false'),
      SIGNUP_REQUIRE_PHONE_VERIFICATION: setting(env.boolean(), 'signup needs a code sent to a phone', 'false'),
      SIGNUP_BLOCKED_EMAIL_DOMAINS: setting(v.string(), 'comma-separated domains (and their subdomains) that cannot sign up', ''),
      SIGNUP_BLOCKED_EMAIL_PATTERNS: setting(
        (name) =>
          v.pipe(
            v.string(),
            v.check((text) => splitList(text).every(isRegex), `${name} must be comma-separated regular expressions`),
          ),
        'comma-separated regular expressions (case-insensitive) of addresses that cannot sign up',
        '',
      ),
      SIGNUP_RESERVED_USERNAMES: setting(v.string(), 'usernames nobody may sign up with', RESERVED_USERNAMES),
      SIGNUP_IP_LIMIT: setting(env.integer(1, 100_000), 'signups from one client address in a window (signups with an invite code are not counted)', '20'),
      SIGNUP_CHECK_IP_LIMIT: setting(
        env.integer(1, 100_000),
        'signup checks from one client address in a window: preSignupValidate calls and signups refused as taken (each tells whether an address or username has an account)',
        '60',
      ),
      SIGNUP_WINDOW_SECONDS: setting(env.integer(1, 7 * 86_400), 'the window of the signup limits', '3600'),
      OTP_REQUEST_LIMIT: setting(env.integer(1, 100_000), 'one-time code requests per identifier in a window', '5'),
      OTP_REQUEST_IP_LIMIT: setting(env.integer(1, 100_000), 'one-time code requests per client address in a window', '30'),
      OTP_VERIFY_FAILURE_LIMIT: setting(env.integer(1, 100_000), 'wrong codes per client address, and per e-mail address or phone number, in a window', '30'),
      OTP_WINDOW_SECONDS: setting(env.integer(1, 86_400), 'the window of the one-time code limits', '900'),
      OAUTH_PROVIDERS: setting(
        v.string(),
        'comma-separated OpenID Connect providers; each needs OAUTH_<NAME>_CLIENT_ID, _CLIENT_SECRET and, unless a preset (google, gitlab, apple), _ISSUER',
        '',
      ),
      OAUTH_ALLOW_HTTP: setting(env.boolean(), 'allow http:// issuers (a local test provider only)', 'false'),
      SMTP_URL: setting((name) => v.pipe(v.string(), v.regex(/^smtps?:\/\//, `${name} must start with smtp:// or smtps://`)), 'e-mail delivery'),
      MAIL_FROM: setting(v.pipe(v.string(), v.minLength(3)), 'sender of e-mails', 'rpc-service <no-reply@localhost>'),
      SMS_API_URL: setting(env.url(), 'a Twilio-style messaging API for SMS and WhatsApp'),
      SMS_ACCOUNT_SID: setting(v.string(), 'account of the messaging API'),
      SMS_AUTH_TOKEN: setting(v.string(), 'token of the messaging API'),
      SMS_FROM: setting(v.string(), 'sender number for SMS'),
      WHATSAPP_FROM: setting(v.string(), 'sender number for WhatsApp'),
    }).entries,
  ),
  v.rawTransform(({ dataset, addIssue, NEVER }) => {
    const e = dataset.value;
    const providers: OAuthProviderConfig[] = [];
    for (const name of splitList(e.OAUTH_PROVIDERS.toLowerCase())) {
      const problem = oauthProvider(name, e as Record<string, unknown>, providers);
      if (problem) addIssue({ message: problem });
    }
    const sms =
      e.SMS_API_URL && e.SMS_ACCOUNT_SID && e.SMS_AUTH_TOKEN
        ? { apiUrl: e.SMS_API_URL, accountSid: e.SMS_ACCOUNT_SID, authToken: e.SMS_AUTH_TOKEN, smsFrom: e.SMS_FROM, whatsappFrom: e.WHATSAPP_FROM }
        : undefined;
    const smsIncomplete = !sms && Boolean(e.SMS_API_URL || e.SMS_ACCOUNT_SID || e.SMS_AUTH_TOKEN);
    if (smsIncomplete) addIssue({ message: 'SMS_API_URL, SMS_ACCOUNT_SID and SMS_AUTH_TOKEN go together' });
    if (providers.length !== splitList(e.OAUTH_PROVIDERS).length || smsIncomplete) return NEVER;
    return {
      sessionTtlSeconds: e.SESSION_TTL_SECONDS,
      loginFailureLimit: e.LOGIN_FAILURE_LIMIT,
      loginAccountFailureLimit: e.LOGIN_ACCOUNT_FAILURE_LIMIT,
      loginIpFailureLimit: e.LOGIN_IP_FAILURE_LIMIT,
      loginFailureWindowSeconds: e.LOGIN_FAILURE_WINDOW_SECONDS,
      signupMode: e.SIGNUP_MODE,
      signupRequireEmailVerification: e.SIGNUP_REQUIRE_EMAIL_VERIFICATION,
      signupRequirePhoneVerification: e.SIGNUP_REQUIRE_PHONE_VERIFICATION,
      /** Lower-case domains; each also blocks its subdomains. */
      signupBlockedEmailDomains: splitList(e.SIGNUP_BLOCKED_EMAIL_DOMAINS.toLowerCase()),
      signupBlockedEmailPatterns: splitList(e.SIGNUP_BLOCKED_EMAIL_PATTERNS).map((pattern) => new RegExp(pattern, 'i')),
      /** Lower-case usernames nobody may sign up with. */
      signupReservedUsernames: splitList(e.SIGNUP_RESERVED_USERNAMES.toLowerCase()),
      signupIpLimit: e.SIGNUP_IP_LIMIT,
      signupCheckIpLimit: e.SIGNUP_CHECK_IP_LIMIT,
      signupWindowSeconds: e.SIGNUP_WINDOW_SECONDS,
      otpRequestLimit: e.OTP_REQUEST_LIMIT,
      otpRequestIpLimit: e.OTP_REQUEST_IP_LIMIT,
      otpVerifyFailureLimit: e.OTP_VERIFY_FAILURE_LIMIT,
      otpWindowSeconds: e.OTP_WINDOW_SECONDS,
      oauthProviders: providers,
      /** Allow http:// issuers (a local test provider); never in production. */
      oauthAllowHttp: e.OAUTH_ALLOW_HTTP,
      messaging: { smtpUrl: e.SMTP_URL, mailFrom: e.MAIL_FROM, sms } satisfies MessagingConfig,
    };
  }),
);

export type AuthConfig = v.InferOutput<typeof authSettings>;

/** Where a provider's settings start: `OAUTH_<NAME>`, with dashes as underscores. */
export const oauthSettingsPrefix = (name: string): string => `OAUTH_${name.toUpperCase().replace(/-/g, '_')}`;

/** Adds the provider `OAUTH_<NAME>_*` describes, or tells what is wrong with it. */
function oauthProvider(name: string, e: Record<string, unknown>, providers: OAuthProviderConfig[]): string | undefined {
  if (!/^[a-z][a-z0-9-]*$/.test(name)) return `OAuth provider name "${name}" must be lower-case letters, digits and dashes`;
  // /auth/join is the question before joining an account (oauth.routes.ts), not a provider's login.
  if (name === 'join') return 'OAuth provider name "join" is reserved; name the provider otherwise';
  const key = oauthSettingsPrefix(name);
  const read = (suffix: string) => (typeof e[`${key}_${suffix}`] === 'string' ? (e[`${key}_${suffix}`] as string) : undefined);
  const issuer = read('ISSUER') || OAUTH_PRESETS[name];
  const clientId = read('CLIENT_ID');
  const clientSecret = read('CLIENT_SECRET');
  const missing = [!issuer && `${key}_ISSUER`, !clientId && `${key}_CLIENT_ID`, !clientSecret && `${key}_CLIENT_SECRET`].filter(Boolean);
  if (missing.length > 0) return `OAuth provider "${name}" needs ${missing.join(', ')}`;
  if (!URL.canParse(issuer!)) return `${key}_ISSUER must be a URL`;
  providers.push({ name, issuer: issuer!, clientId: clientId!, clientSecret: clientSecret!, scopes: read('SCOPES') || 'openid email profile' });
  return undefined;
}
