import { badRequest, randomToken, sha256Hex, type Database, type RowOf } from 'rpc-service/plugin';
import type { PendingLink } from './pending-link.entity.ts';
import type { User } from './user.entity.ts';
import type { UserService } from './user.service.ts';

/** The cookie that carries a JoinQuestion's token from the question to its answer (SameSite=Lax: another site's form cannot send it). */
export const JOIN_COOKIE = 'auth_join';

/** How long a question waits for its answer: a login's ten minutes. */
const QUESTION_TTL_MS = 10 * 60_000;

/** A provider's sign-in that proved the address, to be linked when the person joins (null: a one-time code proved it). */
export interface ProviderSignIn {
  provider: string;
  subject: string;
  externalLoginId: string | null;
}

/**
 * A sign-in that proved an address belonging to an account whose owner never
 * proved it (an administrator may have made it, and may hold its password,
 * sessions and API keys): nothing changes until the person answers whether to
 * join it. `token` goes to the browser (JOIN_COOKIE), which brings it back with
 * the answer (`POST /auth/join`).
 */
export interface JoinQuestion {
  status: 'question';
  token: string;
  expiresAt: Date;
  /** The provider the person signed in with; null for a one-time code sent to the address. */
  provider: string | null;
  email: string;
  username: string;
  role: string;
  /** The name of the subscription (tenant) the account belongs to. */
  tenant: string;
}

/** A question answered: declined (nothing changed), or the person joins `user` with what proved the address. */
export type JoinAnswer = { status: 'declined'; email: string; external: boolean } | { status: 'join'; user: User; email: string; via: ProviderSignIn | null };

type PendingRow = RowOf<PendingLink, 'provider' | 'subject' | 'email' | 'userId' | 'externalLoginId'>;

interface Deps {
  db: Database;
  userService: UserService;
}

/**
 * The question before joining an account someone else may have made, for
 * every sign-in that proves an address (a provider's verified one, a one-time
 * code sent to it): kept in `auth_pending_link` (only the token's hash), shown
 * and answered by the routes of oauth.routes.ts. Joining itself belongs to the
 * sign-in that asked (OAuthService.join, AuthService.joinWithCode), through
 * UserService.claim.
 */
export class JoinService {
  readonly #deps: Deps;

  constructor(deps: Deps) {
    this.#deps = deps;
  }

  async ask(user: User, email: string, via: ProviderSignIn | null): Promise<JoinQuestion> {
    const { db } = this.#deps;
    const token = randomToken(32);
    const expiresAt = new Date(Date.now() + QUESTION_TTL_MS);
    await db.execute(
      `insert into auth_pending_link (token_hash, provider, subject, email, user_id, external_login_id, expires_at) values (?, ?, ?, ?, ?, ?, ?)`,
      [sha256Hex(token), via?.provider ?? null, via?.subject ?? null, email, user.id, via?.externalLoginId ?? null, expiresAt],
    );
    await db.execute('delete from auth_pending_link where expires_at < now()');
    return { status: 'question', token, expiresAt, ...(await this.#describe(user, email, via?.provider ?? null)) };
  }

  /** The question a token holds, to show again (`GET /auth/join`); BAD_REQUEST when it is unknown, answered or expired. */
  async question(token: string): Promise<Omit<JoinQuestion, 'status' | 'token' | 'expiresAt'>> {
    const [pending] = await this.#deps.db.execute<PendingRow>(
      'select provider, subject, email, user_id, external_login_id from auth_pending_link where token_hash = ? and expires_at > now()',
      [sha256Hex(token)],
    );
    if (!pending) throw unknownQuestion();
    return this.#describe(await this.#holder(pending), pending.email, pending.provider);
  }

  /**
   * The person's answer to the question a token holds, taken once. Declined:
   * nothing changes, and an external login waiting on it ends. Join: the
   * account, which must still have the address it was asked about.
   */
  async answer(token: string, join: boolean): Promise<JoinAnswer> {
    const { db } = this.#deps;
    const [pending] = await db.execute<PendingRow>(
      `delete from auth_pending_link where token_hash = ? and expires_at > now() returning provider, subject, email, user_id, external_login_id`,
      [sha256Hex(token)],
    );
    if (!pending) throw unknownQuestion();
    if (!join) {
      if (pending.external_login_id) {
        await db.execute('update auth_external_login set expires_at = now() where id = ? and completed_at is null', [pending.external_login_id]);
      }
      return { status: 'declined', email: pending.email, external: pending.external_login_id !== null };
    }
    const via = pending.provider === null ? null : { provider: pending.provider, subject: pending.subject!, externalLoginId: pending.external_login_id };
    return { status: 'join', user: await this.#holder(pending), email: pending.email, via };
  }

  /** The account a question is about, as long as it still has the address it was asked about. */
  async #holder(pending: PendingRow): Promise<User> {
    const { userService } = this.#deps;
    const holder = await userService.withEmail(pending.email);
    const user = holder?.id === pending.user_id ? await userService.findForLogin(holder.subscriptionId, holder.id) : null;
    if (!user) throw badRequest('This account changed since you were asked; sign in again');
    return user;
  }

  async #describe(user: User, email: string, provider: string | null) {
    const [tenant] = await this.#deps.db.execute<{ name: string }>('select name from auth_subscription where id = ?', [user.subscriptionId]);
    return { provider, email, username: user.username, role: user.role, tenant: tenant?.name ?? user.subscriptionId };
  }
}

const unknownQuestion = () => badRequest('This question is unknown or has expired; sign in again');
