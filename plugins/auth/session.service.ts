import { randomUUID } from 'node:crypto';
import {
  ACROSS_TENANTS,
  randomToken,
  sha256Hex,
  unauthenticated,
  type CredentialCache,
  type Credentials,
  type CredentialVerifier,
  type Database,
  type Principal,
  type RowOf,
} from 'rpc-service/plugin';
import type { AuthConfig } from './config.ts';
import type { Lifecycle } from './lifecycle.ts';
import { Session } from './session.entity.ts';
import type { User } from './user.entity.ts';

export interface IssuedSession {
  token: string;
  expiresAt: Date;
  sessionId: string;
}

/** How a person proved who they are (Session.amr). */
export const AMR_METHODS = ['pwd', 'code', 'oauth', 'otp', 'recovery', 'webauthn'] as const;
export type AmrMethod = (typeof AMR_METHODS)[number];

/** How a session was made, and from where. */
export interface SessionOrigin {
  amr: readonly AmrMethod[];
  clientIp: string | null;
  userAgent: string | null;
}

/** A session as its person (or their admin) sees it in a list of devices. */
export interface SessionView {
  id: string;
  createdAt: string;
  lastSeenAt: string;
  expiresAt: string;
  signedInAt: string;
  amr: AmrMethod[];
  ipAddress: string | null;
  userAgent: string | null;
}

type SessionRow = RowOf<Session, 'id' | 'subscriptionId' | 'userId' | 'expiresAt' | 'lastSeenAt' | 'signedInAt'> & RowOf<User, 'role' | 'isActive'>;

/**
 * Session tokens: 32 random bytes, stored only as SHA-256, expiring after
 * SESSION_TTL_SECONDS without use. Also the verifier the core authenticates
 * session tokens with.
 */
export class SessionService implements CredentialVerifier {
  readonly #db: Database;
  readonly #credentials: Credentials;
  readonly #ttlMs: number;
  // Sliding expiry is written back at most this often per session, not on every call.
  readonly #touchEveryMs: number;
  readonly #cache: CredentialCache;
  readonly #lifecycle: Lifecycle;

  constructor({ db, credentials, config, lifecycle }: { db: Database; credentials: Credentials; config: AuthConfig; lifecycle: Lifecycle }) {
    this.#db = db;
    this.#lifecycle = lifecycle;
    this.#credentials = credentials;
    this.#cache = credentials.createCache();
    this.#ttlMs = config.sessionTtlSeconds * 1000;
    this.#touchEveryMs = Math.min(3_600_000, this.#ttlMs / 10);
  }

  async create(user: Pick<User, 'id' | 'subscriptionId'>, origin: SessionOrigin): Promise<IssuedSession> {
    const token = randomToken(32);
    const now = new Date();
    const expiresAt = new Date(now.getTime() + this.#ttlMs);
    const em = this.#db.forkEm(user.subscriptionId);
    const session = em.create(Session, {
      id: randomUUID(),
      subscriptionId: user.subscriptionId,
      userId: user.id,
      tokenHash: sha256Hex(token),
      createdAt: now,
      lastSeenAt: now,
      expiresAt,
      amr: origin.amr.join(' '),
      signedInAt: now,
      ipAddress: origin.clientIp,
      userAgent: origin.userAgent?.slice(0, 300) ?? null,
    });
    await em.flush();
    return { token, expiresAt, sessionId: session.id };
  }

  /**
   * The principal of a cached, unexpired session whose expiry needs no write
   * yet; undefined when the database must be asked. Throws when it expired.
   */
  cached(token: string): Principal | undefined {
    const tokenHash = sha256Hex(token);
    const entry = this.#cache.get(tokenHash);
    if (!entry) return undefined;
    const now = Date.now();
    if (entry.expiresAt!.getTime() <= now) {
      this.#cache.delete(tokenHash);
      throw unauthenticated('Session expired; log in again');
    }
    return now - entry.lastSeenAt!.getTime() < this.#touchEveryMs ? entry.principal : undefined;
  }

  /**
   * The session's principal; UNAUTHENTICATED when unknown, expired or its
   * user is inactive. `touch: false` checks without counting as a use (no slide).
   */
  async authenticate(token: string, { touch = true }: { touch?: boolean } = {}): Promise<Principal> {
    return this.cached(token) ?? this.#load(token, touch);
  }

  async #load(token: string, touch: boolean): Promise<Principal> {
    const tokenHash = sha256Hex(token);
    const now = Date.now();
    let entry = this.#cache.get(tokenHash);
    if (!entry) {
      const readAt = this.#cache.generation;
      const [row] = await this.#db.execute<SessionRow>(
        `select s.id, s.subscription_id, s.user_id, s.expires_at, s.last_seen_at, s.signed_in_at, u.role, u.is_active
         from auth_session s join auth_user u on u.subscription_id = s.subscription_id and u.id = s.user_id where s.token_hash = ?`,
        [tokenHash],
      );
      if (!row || !row.is_active) throw unauthenticated('Invalid or revoked session');
      entry = {
        principal: {
          subscriptionId: row.subscription_id,
          userId: row.user_id,
          role: row.role,
          apiKeyId: null,
          sessionId: row.id,
          initialContext: null,
          signedInAt: new Date(row.signed_in_at).getTime(),
        },
        expiresAt: new Date(row.expires_at),
        lastSeenAt: new Date(row.last_seen_at),
      };
      this.#cache.set(tokenHash, entry, readAt);
    }
    if (entry.expiresAt!.getTime() <= now) {
      this.#cache.delete(tokenHash);
      throw unauthenticated('Session expired; log in again');
    }
    if (touch && now - entry.lastSeenAt!.getTime() >= this.#touchEveryMs) {
      entry.lastSeenAt = new Date(now);
      entry.expiresAt = new Date(now + this.#ttlMs);
      await this.#db.execute('update auth_session set last_seen_at = ?, expires_at = ? where subscription_id = ? and id = ?', [
        entry.lastSeenAt,
        entry.expiresAt,
        entry.principal.subscriptionId,
        entry.principal.sessionId,
      ]);
    }
    return entry.principal;
  }

  /**
   * The person of a session proved who they are again (a step-up): it counts
   * as signed in now, with the methods added to how it was made.
   */
  async confirm(subscriptionId: string, sessionId: string, amr: readonly AmrMethod[]): Promise<SessionView> {
    const em = this.#db.forkEm(subscriptionId);
    const session = await em.findOne(Session, { id: sessionId });
    if (!session) throw unauthenticated('Invalid or revoked session');
    session.amr = [...new Set([...session.amr.split(' ').filter(Boolean), ...amr])].join(' ');
    session.signedInAt = new Date();
    await em.flush();
    await this.#credentials.changed({ sessionId });
    return viewOf(session);
  }

  /** A user's unexpired sessions, the most recently used first. */
  async listOfUser(subscriptionId: string, userId: string): Promise<SessionView[]> {
    const sessions = await this.#db
      .forkEm(subscriptionId)
      .find(Session, { userId, expiresAt: { $gt: new Date() } }, { orderBy: { lastSeenAt: 'desc', id: 'asc' }, limit: 1000 });
    return sessions.map(viewOf);
  }

  /** One session as its person sees it; null when it ended. */
  async view(subscriptionId: string, sessionId: string): Promise<SessionView | null> {
    const session = await this.#db.forkEm(subscriptionId).findOne(Session, { id: sessionId });
    return session ? viewOf(session) : null;
  }

  /** Ends one session of a user; false when the user has no such session. */
  async revokeOfUser(subscriptionId: string, userId: string, sessionId: string): Promise<boolean> {
    const deleted = await this.#db.forkEm(null).nativeDelete(Session, { subscriptionId, userId, id: sessionId }, ACROSS_TENANTS);
    if (deleted > 0) await this.#credentials.changed({ sessionId });
    return deleted > 0;
  }

  async revoke(subscriptionId: string, sessionId: string): Promise<void> {
    await this.#db.forkEm(null).nativeDelete(Session, { subscriptionId, id: sessionId }, ACROSS_TENANTS);
    await this.#credentials.changed({ sessionId });
  }

  /** Ends every session of a user, except one when given (e.g. the caller's own); answers how many ended. */
  async revokeAllOfUser(subscriptionId: string, userId: string, exceptSessionId?: string | null): Promise<number> {
    const where = exceptSessionId ? { subscriptionId, userId, id: { $ne: exceptSessionId } } : { subscriptionId, userId };
    const deleted = await this.#db.forkEm(null).nativeDelete(Session, where, ACROSS_TENANTS);
    await this.#credentials.changed({ userId });
    await this.#lifecycle.sessionsEnded({ subscriptionId, userId });
    return deleted;
  }
}

const viewOf = (session: Session): SessionView => ({
  id: session.id,
  createdAt: session.createdAt.toISOString(),
  lastSeenAt: session.lastSeenAt.toISOString(),
  expiresAt: session.expiresAt.toISOString(),
  signedInAt: session.signedInAt.toISOString(),
  amr: session.amr.split(' ').filter((method): method is AmrMethod => (AMR_METHODS as readonly string[]).includes(method)),
  ipAddress: session.ipAddress ?? null,
  userAgent: session.userAgent ?? null,
});
