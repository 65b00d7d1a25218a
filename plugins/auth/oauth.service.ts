import { randomUUID } from 'node:crypto';
import type { Configuration, IDToken } from 'openid-client';
import {
  badRequest,
  digestsEqual,
  isUuid,
  notFound,
  onFirstUse,
  randomToken,
  RpcError,
  sha256,
  sha256Hex,
  type Database,
  type EntityManager,
  type Logger,
  type RowOf,
  type SecretBox,
} from 'rpc-service/plugin';
import { OAUTH_PRESETS, oauthSettingsPrefix, type AuthConfig, type OAuthProviderConfig } from './config.ts';
import type { ExternalLogin } from './external-login.entity.ts';
import type { JoinQuestion, JoinService, ProviderSignIn } from './join.service.ts';
import type { Lifecycle } from './lifecycle.ts';
import { OAuthLink } from './oauth-link.entity.ts';
import type { OAuthState } from './oauth-state.entity.ts';
import type { SignInFrom } from './auth.service.ts';
import type { SessionService } from './session.service.ts';
import type { SignInOutcome, SignInService } from './sign-in.service.ts';
import { checkSignupRules } from './signup-policy.ts';
import { Subscription } from './subscription.entity.ts';
import { User } from './user.entity.ts';
import { emailProof, ownerProvedEmail, type UserService } from './user.service.ts';
import { toUserView, type UserView } from './user-view.ts';

/** openid-client, loaded by the first OpenID Connect login: an installation without one does not carry it. */
const loadOidc = onFirstUse(() => import('openid-client'));

/** How long a login may take at the provider, and how long an external login can be polled. */
const LOGIN_TTL_MS = 10 * 60_000;

/** The one user a provider account is linked to: (provider, subject) is the key of auth_oauth_link. */
const LINKED_USER = 'select subscription_id, user_id from auth_oauth_link where provider = ? and subject = ?';

/** A provider account's link: the user it signs in, with their subscription. */
interface LinkedUser {
  subscription_id: string;
  user_id: string;
}

export interface ExternalLoginStarted {
  sessionId: string;
  loginUrl: string;
  pollToken: string;
  expiresAt: string;
}

export type ExternalLoginStatus = { status: 'pending' | 'expired' } | { status: 'completed'; token: string; expiresAt: string; user: UserView };

/** A provider's sign-in: a session (handed over when another program started it and collects it by polling), a gate's challenge, or a question. */
export type OAuthLogin = SignInOutcome | JoinQuestion;

interface Deps {
  config: AuthConfig;
  db: Database;
  secretBox: SecretBox;
  sessionService: SessionService;
  signInService: SignInService;
  userService: UserService;
  lifecycle: Lifecycle;
  joinService: JoinService;
  logger: Logger;
}

/**
 * OpenID Connect login (openid-client): authorization code flow with state,
 * nonce and PKCE; users are found by their provider account's link, linked by
 * a verified e-mail address its owner proved (or, when nobody did, once the
 * person agrees to join), or created. This login is the only maker of links.
 */
export class OAuthService {
  readonly #deps: Deps;
  readonly #providers: Map<string, OAuthProviderConfig>;
  readonly #discovered = new Map<string, Promise<Configuration>>();

  constructor(deps: Deps) {
    this.#deps = deps;
    this.#providers = new Map(deps.config.oauthProviders.map((provider) => [provider.name, provider]));
  }

  get providerNames(): string[] {
    return [...this.#providers.keys()];
  }

  /** A configured provider; a preset nobody configured is FEATURE_UNAVAILABLE with the settings that would, any other name NOT_FOUND. */
  provider(name: string): OAuthProviderConfig {
    const key = name.toLowerCase();
    const provider = this.#providers.get(key);
    if (provider) return provider;
    if (Object.hasOwn(OAUTH_PRESETS, key)) {
      const prefix = oauthSettingsPrefix(key);
      throw new RpcError(
        'FEATURE_UNAVAILABLE',
        `The ${key} login is not configured: add ${key} to OAUTH_PROVIDERS and set ${prefix}_CLIENT_ID and ${prefix}_CLIENT_SECRET`,
      );
    }
    throw notFound(`OAuth provider "${name}" is not configured`);
  }

  /** Discovery once per provider; a failure is forgotten so the next login tries again. */
  #configuration(provider: OAuthProviderConfig): Promise<Configuration> {
    let pending = this.#discovered.get(provider.name);
    if (!pending) {
      pending = loadOidc().then((oidc) => {
        const options = this.#deps.config.oauthAllowHttp ? { execute: [oidc.allowInsecureRequests] } : undefined;
        return oidc.discovery(new URL(provider.issuer), provider.clientId, provider.clientSecret, undefined, options);
      });
      pending.catch((err) => {
        this.#discovered.delete(provider.name);
        this.#deps.logger.error({ err, provider: provider.name }, 'OpenID provider discovery failed');
      });
      this.#discovered.set(provider.name, pending);
    }
    return pending.catch(() => {
      throw new RpcError('FEATURE_UNAVAILABLE', `The ${provider.name} login is unavailable right now; try again later`);
    });
  }

  static callbackUrl(baseUrl: string, provider: string): string {
    return `${baseUrl}/auth/${provider}/callback`;
  }

  /** The provider URL to send the browser to; the login's secrets wait in the database. */
  async authorizationUrl(providerName: string, baseUrl: string, externalLoginId?: string): Promise<string> {
    const provider = this.provider(providerName);
    const configuration = await this.#configuration(provider);
    if (externalLoginId) await this.#pendingExternal(externalLoginId);
    const oidc = await loadOidc();
    const state = oidc.randomState();
    const nonce = oidc.randomNonce();
    const verifier = oidc.randomPKCECodeVerifier();
    await this.#deps.db.execute(
      `insert into auth_oauth_state (state_hash, provider, code_verifier, nonce, external_login_id, expires_at)
       values (?, ?, ?, ?, ?, ?)`,
      [sha256Hex(state), provider.name, this.#deps.secretBox.encrypt(verifier), nonce, externalLoginId ?? null, new Date(Date.now() + LOGIN_TTL_MS)],
    );
    await this.#deps.db.execute('delete from auth_oauth_state where expires_at < now()');
    return oidc
      .buildAuthorizationUrl(configuration, {
        redirect_uri: OAuthService.callbackUrl(baseUrl, provider.name),
        scope: provider.scopes,
        state,
        nonce,
        code_challenge: await oidc.calculatePKCECodeChallenge(verifier),
        code_challenge_method: 'S256',
      })
      .toString();
  }

  /** Completes the login the provider redirected back with: checks state, nonce and PKCE, then finds or makes the user. */
  async completeLogin(providerName: string, callbackUrl: URL, baseUrl: string, from: SignInFrom): Promise<OAuthLogin> {
    const provider = this.provider(providerName);
    const state = callbackUrl.searchParams.get('state');
    if (!state) throw badRequest('The provider answered without a state');
    const [pending] = await this.#deps.db.execute<RowOf<OAuthState, 'provider' | 'codeVerifier' | 'nonce' | 'externalLoginId'>>(
      `delete from auth_oauth_state where state_hash = ? and expires_at > now() returning provider, code_verifier, nonce, external_login_id`,
      [sha256Hex(state)],
    );
    if (!pending || pending.provider !== provider.name) throw badRequest('This login is unknown or has expired; start again');
    const configuration = await this.#configuration(provider);
    // The callback URL the provider saw, on the public base URL rather than however the request reached us.
    const seen = new URL(OAuthService.callbackUrl(baseUrl, provider.name));
    seen.search = callbackUrl.search;
    const oidc = await loadOidc();
    let claims: IDToken;
    try {
      const tokens = await oidc.authorizationCodeGrant(configuration, seen, {
        pkceCodeVerifier: this.#deps.secretBox.decrypt(pending.code_verifier),
        expectedState: state,
        expectedNonce: pending.nonce,
        idTokenExpected: true,
      });
      claims = tokens.claims()!;
      // Many providers put e-mail and profile claims only in the UserInfo answer, not in the ID token.
      if (claims.email === undefined && configuration.serverMetadata().userinfo_endpoint) {
        const info = await oidc.fetchUserInfo(configuration, tokens.access_token, claims.sub);
        claims = { ...info, ...claims, email: info.email, email_verified: info.email_verified, given_name: info.given_name, family_name: info.family_name };
      }
    } catch (err) {
      this.#deps.logger.warn({ err, provider: provider.name }, 'OpenID login failed');
      throw badRequest('The provider did not confirm this login; start again');
    }
    const found = await this.#userFor(provider.name, claims);
    if ('user' in found) return this.#signIn(found.user, pending.external_login_id, from);
    return this.#deps.joinService.ask(found.ask, found.email, { provider: provider.name, subject: claims.sub, externalLoginId: pending.external_login_id });
  }

  #signIn(user: User, externalLoginId: string | null, from: SignInFrom): Promise<SignInOutcome> {
    return this.#deps.signInService.attempt(user, { amr: ['oauth'], ...from, resume: externalLoginId ? { externalLoginId } : {} });
  }

  /**
   * Who this sign-in is: the user the provider account is linked to; else the
   * account with the provider's verified address, linked at once only when
   * its owner proved that address (a code they received, or a sign-in with a
   * provider), or to be asked about (`ask`) when only someone else vouched
   * for it (an administrator's isVerified, a signup that proved nothing);
   * else a new user. Profiles an administrator declared play no part.
   */
  async #userFor(provider: string, claims: IDToken): Promise<{ user: User } | { ask: User; email: string }> {
    const linked = await this.#linkedUser(provider, claims.sub);
    if (linked) return { user: await this.#loginUser(linked) };
    const email = typeof claims.email === 'string' ? claims.email.trim().toLowerCase() : undefined;
    if (!email || claims.email_verified !== true) {
      throw badRequest('The provider did not share a verified e-mail address, which is needed to sign in');
    }
    const holder = await this.#deps.userService.withEmail(email);
    if (!holder) return { user: await this.#signup(provider, claims, email) };
    const existing = await this.#loginUser({ subscription_id: holder.subscriptionId, user_id: holder.id });
    if (!ownerProvedEmail(existing)) return { ask: existing, email };
    return { user: await this.#loginUser(await this.#link(provider, claims.sub, existing, email, false)) };
  }

  /** A user a link or an address found; read afresh, so the view shows a link just made. */
  async #loginUser(found: LinkedUser): Promise<User> {
    const user = await this.#deps.userService.findForLogin(found.subscription_id, found.user_id);
    if (!user) throw new RpcError('UNAUTHENTICATED', 'This account no longer exists');
    return user;
  }

  async #linkedUser(provider: string, subject: string): Promise<LinkedUser | undefined> {
    const [link] = await this.#deps.db.execute<LinkedUser>(LINKED_USER, [provider, subject]);
    return link;
  }

  /**
   * Links the provider account to the user; `claim`: the person chose to join
   * an account someone else may have made, which becomes theirs with the link
   * (UserService.claim). When a sign-in of the same provider account at the
   * same time linked it first, nothing else is done and that link holds.
   */
  async #link(provider: string, subject: string, user: User, email: string, claim: boolean): Promise<LinkedUser> {
    const { db, userService } = this.#deps;
    const insert = async (em: EntityManager) => {
      const inserted = await em.execute<{ user_id: string }[]>(
        `insert into auth_oauth_link (provider, subject, user_id, subscription_id, email, created_at) values (?, ?, ?, ?, ?, now())
         on conflict (provider, subject) do nothing returning user_id`,
        [provider, subject, user.id, user.subscriptionId, email],
      );
      return inserted.length > 0;
    };
    const made = claim ? await userService.claim(user, email, 'oauth', insert) : await insert(db.forkEm(user.subscriptionId));
    if (made) return { subscription_id: user.subscriptionId, user_id: user.id };
    return (await this.#linkedUser(provider, subject))!;
  }

  /** The person a provider's sign-in asked (join.service.ts) joins the account: linked, claimed, signed in. */
  async join(user: User, email: string, via: ProviderSignIn, from: SignInFrom): Promise<SignInOutcome> {
    const linked = await this.#link(via.provider, via.subject, user, email, true);
    return this.#signIn(await this.#loginUser(linked), via.externalLoginId, from);
  }

  async #signup(provider: string, claims: IDToken, email: string): Promise<User> {
    const { config, db, lifecycle } = this.#deps;
    const username = await this.#freeUsername(email);
    checkSignupRules(config, { email, username });
    if (config.signupMode === 'invite') {
      const [anyone] = await db.execute<{ exists: boolean }>('select exists(select 1 from auth_user) as exists');
      if (anyone?.exists) throw badRequest('Signup needs an invite code; sign up with it first, then link this login');
    }
    const subscriptionId = randomUUID();
    const user = await db.forkEm(subscriptionId).transactional(async (tx) => {
      tx.create(Subscription, { id: subscriptionId, name: username, serviceCode: null, createdAt: new Date(), updatedAt: new Date() });
      await tx.flush();
      const created = tx.create(
        User,
        this.#deps.userService.newUser({
          subscriptionId,
          email,
          username,
          role: 'admin',
          ...emailProof(email, 'oauth'),
          firstName: typeof claims.given_name === 'string' ? claims.given_name.slice(0, 100) : null,
          lastName: typeof claims.family_name === 'string' ? claims.family_name.slice(0, 100) : null,
        }),
      );
      tx.create(OAuthLink, { provider, subject: claims.sub, userId: created.id, subscriptionId, email, createdAt: new Date() });
      await tx.flush();
      return created;
    });
    await lifecycle.afterSignup({ user: toUserView(user), subscriptionId, joinedExisting: false });
    // Read afresh, so the view shows the link just made.
    return this.#loginUser({ subscription_id: subscriptionId, user_id: user.id });
  }

  /** The e-mail's local part, cleaned; a short suffix when it is taken or reserved. */
  async #freeUsername(email: string): Promise<string> {
    const reserved = new Set(this.#deps.config.signupReservedUsernames);
    const base = (email.slice(0, email.indexOf('@')).replace(/[^A-Za-z0-9._-]/g, '') || 'user').slice(0, 24).padEnd(3, '0');
    for (let attempt = 0; attempt < 5; attempt++) {
      const candidate =
        attempt === 0
          ? base
          : `${base}-${randomToken(3)
              .replace(/[^A-Za-z0-9]/g, 'x')
              .slice(0, 4)}`;
      if (reserved.has(candidate.toLowerCase())) continue;
      const [taken] = await this.#deps.db.execute('select 1 from auth_user where lower(username) = lower(?)', [candidate]);
      if (!taken) return candidate;
    }
    return `user-${randomUUID().slice(0, 8)}`;
  }

  /** Starts a login in a browser for another program, which polls for the session. */
  async createExternalOAuthLoginSession(providerName: string, baseUrl: string): Promise<ExternalLoginStarted> {
    const provider = this.provider(providerName);
    const id = randomUUID();
    const pollToken = randomToken(32);
    const expiresAt = new Date(Date.now() + LOGIN_TTL_MS);
    await this.#deps.db.execute(`insert into auth_external_login (id, provider, poll_token_hash, expires_at, created_at) values (?, ?, ?, ?, now())`, [
      id,
      provider.name,
      sha256Hex(pollToken),
      expiresAt,
    ]);
    await this.#deps.db.execute(`delete from auth_external_login where expires_at < now() - interval '1 day'`);
    return { sessionId: id, loginUrl: `${baseUrl}/auth/${provider.name}?external=${id}`, pollToken, expiresAt: expiresAt.toISOString() };
  }

  async #pendingExternal(id: string): Promise<void> {
    if (!isUuid(id)) throw badRequest('This login link is not valid; start again from the application');
    const [row] = await this.#deps.db.execute('select 1 from auth_external_login where id = ? and completed_at is null and expires_at > now()', [id]);
    if (!row) throw badRequest('This login link has expired or was already used; start again from the application');
  }

  /** The login's state; a completed result is handed out once, then reads as expired. */
  async pollExternalOAuthLoginSession(id: string, pollToken: string): Promise<ExternalLoginStatus> {
    const rows = isUuid(id)
      ? await this.#deps.db.execute<RowOf<ExternalLogin, 'pollTokenHash' | 'completedAt' | 'consumedAt' | 'expiresAt' | 'userId'>>(
          'select poll_token_hash, completed_at, consumed_at, expires_at, user_id from auth_external_login where id = ?',
          [id],
        )
      : [];
    const row = rows[0];
    if (!row || !digestsEqual(Buffer.from(row.poll_token_hash, 'hex'), sha256(pollToken))) throw notFound('Unknown external login session');
    if (row.consumed_at || (!row.completed_at && new Date(row.expires_at).getTime() <= Date.now())) return { status: 'expired' };
    if (!row.completed_at) return { status: 'pending' };
    // Hand the token out once: take it and clear it in one statement.
    const [taken] = await this.#deps.db.execute<{ session_token: string }>(
      `with claimed as (select id, session_token from auth_external_login where id = ? and consumed_at is null for update)
       update auth_external_login set consumed_at = now(), session_token = null
       from claimed where auth_external_login.id = claimed.id returning claimed.session_token`,
      [id],
    );
    if (!taken) return { status: 'expired' };
    const token = this.#deps.secretBox.decrypt(taken.session_token);
    const session = await this.#deps.sessionService.authenticate(token);
    const user = await this.#deps.userService.findForLogin(session.subscriptionId, row.user_id!);
    if (!user) return { status: 'expired' };
    const [expiry] = await this.#deps.db.execute<{ expires_at: Date }>('select expires_at from auth_session where subscription_id = ? and id = ?', [
      session.subscriptionId,
      session.sessionId,
    ]);
    return { status: 'completed', token, expiresAt: new Date(expiry!.expires_at).toISOString(), user: toUserView(user) };
  }
}
