import * as v from 'valibot';
import { defineExtensionPoint, RateLimiter, unauthenticated, type Database, type Extensions, type RpcError, type SecretBox } from 'rpc-service/plugin';
import type { AuthConfig } from './config.ts';
import type { Lifecycle } from './lifecycle.ts';
import type { AmrMethod, SessionService } from './session.service.ts';
import type { User } from './user.entity.ts';
import type { UserService } from './user.service.ts';
import { toUserView, type UserView } from './user-view.ts';

/** A person who proved a first factor, before any session is made for them. */
export interface SignInAttempt {
  user: Pick<User, 'id' | 'subscriptionId' | 'role' | 'createdAt'>;
  /** What they proved so far. */
  amr: readonly AmrMethod[];
  clientIp: string;
  userAgent: string | null;
  /** What finishing the sign-in later needs that only its door knows: the external login (OAuthService) to hand the session to. */
  resume: SignInResume;
}

export interface SignInResume {
  externalLoginId?: string;
}

/** Why a sign-in makes no session yet, and where a browser goes on with it. */
export interface SignInChallenge {
  /** What an operation's caller is answered (SECOND_FACTOR_REQUIRED with a ticket, say). */
  error: RpcError;
  /** The path, under PUBLIC_URL, of the page a browser finishes the sign-in at. */
  page: string;
}

/** What a plugin contributes to `auth.signIn`: a step every sign-in takes before its session is made. */
export interface SignInGate {
  /** Undefined lets the session be made; a challenge stops it, and the person goes on as it says. */
  check(attempt: SignInAttempt): Promise<SignInChallenge | undefined>;
}

export const signInPoint = defineExtensionPoint({
  id: 'auth.signIn',
  describe: 'A step every sign-in takes before its session is made: a plugin may answer a challenge (a second factor) instead.',
  contribution: v.strictObject({ check: v.function() }),
});

/** A session made: the token (the session cookie), when it expires unused, and its user. */
export interface SessionGrant {
  token: string;
  expiresAt: string;
  user: UserView;
}

/** A sign-in finished: its session, or, for an external login, the session handed to the application that polls for it. */
export type SignedIn = ({ status: 'signed-in' } & SessionGrant) | { status: 'handed-over'; user: UserView };

/** A sign-in's end: signed in, or stopped by a gate's challenge. */
export type SignInOutcome = SignedIn | { status: 'challenged'; challenge: SignInChallenge };

/** How long an address a user signed in from counts as theirs (AuthService.login). */
const KNOWN_ADDRESS_SECONDS = 90 * 86_400;

interface Deps {
  db: Database;
  secretBox: SecretBox;
  extensions: Extensions;
  sessionService: SessionService;
  userService: UserService;
  lifecycle: Lifecycle;
  rateLimiter: RateLimiter;
  config: AuthConfig;
}

/**
 * Every sign-in's last steps, whichever door it came by (a password, a code,
 * a provider, a passkey): the gates of `auth.signIn` (a second factor), then
 * the session. Exported, so the plugin that checks a second factor finishes
 * the sign-in its gate stopped.
 */
export class SignInService {
  readonly #deps: Deps;

  constructor(deps: Deps) {
    this.#deps = deps;
  }

  /** For an operation's caller: the session, or the first gate's challenge thrown as its error. */
  async start(user: User, attempt: Omit<SignInAttempt, 'user'>): Promise<SignedIn> {
    const outcome = await this.attempt(user, attempt);
    if (outcome.status === 'challenged') throw outcome.challenge.error;
    return outcome;
  }

  /** The session, or the challenge of the first gate that has one (a browser's sign-in goes on at its page). */
  async attempt(user: User, attempt: Omit<SignInAttempt, 'user'>): Promise<SignInOutcome> {
    if (!user.isActive) throw unauthenticated('This account is deactivated');
    for (const { value } of this.#deps.extensions.get('auth.signIn')) {
      const challenge = await value.check({ ...attempt, user });
      if (challenge) return { status: 'challenged', challenge };
    }
    return this.finish(user, attempt);
  }

  /**
   * Makes the session of a sign-in every gate let through, or whose challenge
   * was met (`amr` then names the factors proven): read afresh, so a user
   * deactivated meanwhile gets none.
   */
  async finish(found: Pick<User, 'id' | 'subscriptionId'>, attempt: Omit<SignInAttempt, 'user'>): Promise<SignedIn> {
    const user = await this.#deps.userService.findForLogin(found.subscriptionId, found.id);
    if (!user?.isActive) throw unauthenticated('This account is deactivated or gone');
    const session = await this.#deps.sessionService.create(user, attempt);
    // A sign-in finished (every factor given): the address is one the person signs in from (AuthService.login).
    await this.#deps.rateLimiter.hit([knownAddress(accountOf(user.id), attempt.clientIp)], KNOWN_ADDRESS_SECONDS);
    const view = toUserView(user);
    await this.#deps.lifecycle.afterLogin({ user: view, method: methodOf(attempt.amr) });
    if (attempt.resume.externalLoginId) {
      // An external login that expired meanwhile leaves its session to expire unused: the browser is not the application.
      await this.#handOver(attempt.resume.externalLoginId, session.token, user.id);
      return { status: 'handed-over', user: view };
    }
    return { status: 'signed-in', token: session.token, expiresAt: session.expiresAt.toISOString(), user: view };
  }

  /** Whether the user finished a sign-in from this client address lately: failures from it are counted apart from others' (AuthService.login). */
  async knownAddress(userId: string, clientIp: string): Promise<boolean> {
    return (await this.#deps.rateLimiter.count(knownAddress(accountOf(userId), clientIp))) > 0;
  }

  /** Gives an external login (OAuthService.createExternalOAuthLoginSession) its session, unless it expired or was collected meanwhile. */
  async #handOver(externalLoginId: string, token: string, userId: string): Promise<void> {
    await this.#deps.db.execute(
      `update auth_external_login set session_token = ?, user_id = ?, completed_at = now()
       where id = ? and completed_at is null and expires_at > now()`,
      [this.#deps.secretBox.encrypt(token), userId, externalLoginId],
    );
  }
}

const methodOf = (amr: readonly AmrMethod[]): 'password' | 'code' | 'oauth' | 'passkey' =>
  amr.includes('pwd') ? 'password' : amr.includes('code') ? 'code' : amr.includes('oauth') ? 'oauth' : 'passkey';

/** The name a user's login failures and sign-ins are counted under (AuthService.login). */
export const accountOf = (userId: string): string => `user:${userId}`;

/** Counts the sign-ins of an account from an address (AuthService.login). */
export const knownAddress = (account: string, clientIp: string): string => RateLimiter.bucket('login-known', `${account} ${clientIp}`);
