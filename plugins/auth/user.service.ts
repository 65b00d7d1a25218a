import { randomUUID } from 'node:crypto';
import {
  badRequest,
  conflict,
  isUuid,
  pgArray,
  RateLimiter,
  RpcError,
  validationError,
  type AuthenticatedContext,
  type Credentials,
  type Database,
  type EntityManager,
  type Role,
  type RowOf,
  type UploadService,
} from 'rpc-service/plugin';
import type { AuthConfig } from './config.ts';
import type { Lifecycle } from './lifecycle.ts';
import { OAuthLink } from './oauth-link.entity.ts';
import { hashPassword, verifyPassword } from './password.ts';
import { Session } from './session.entity.ts';
import type { SessionService } from './session.service.ts';
import { User, type DeclaredProfile, type EmailProof, type OAuthProfile } from './user.entity.ts';
import { ADMIN_USER_FIELDS, toAdminUserRecord, toUserView, type AdminUserRecord, type UserView } from './user-view.ts';

export type NewUser = Pick<User, 'subscriptionId' | 'email' | 'username' | 'role'> & Partial<User>;

/** A provider profile as an administrator sends it in `oauthProfiles`: `email` and `linked` as a record read shows them. */
export interface ProfileInput {
  provider: string;
  id: string;
  email?: string;
  linked?: boolean;
}

/** What an administrator may give a user: its fields, with `oauthProfiles` as sent. */
export type UserChanges = Partial<Omit<User, 'oauthProfiles' | 'declaredProfiles' | 'emailProven' | 'emailProvenBy' | 'passwordHash'>> & {
  oauthProfiles?: ProfileInput[];
};

/** The fields that record that the owner of `email` proved it (see the User entity's emailProven). */
export const emailProof = (email: string, by: EmailProof) => ({ isVerified: true, emailProven: email.toLowerCase(), emailProvenBy: by });

/** Whether the user's owner proved the address the user has now; an administrator's isVerified is no proof. */
export const ownerProvedEmail = (user: Pick<User, 'email' | 'emailProven'>): boolean => user.emailProven === user.email.toLowerCase();

/** Anything with the EntityManager of a request (a context) or of a transaction. */
export interface WithEm {
  em: EntityManager;
}

/** What a credential of a user stands for, for the verifiers of credentials. */
export interface CredentialHolder {
  role: Role;
  isActive: boolean;
}

interface Deps {
  db: Database;
  credentials: Credentials;
  uploadService: UploadService;
  rateLimiter: RateLimiter;
  config: AuthConfig;
  sessionService: SessionService;
  lifecycle: Lifecycle;
}

/**
 * The users of the service, for this plugin and, through `deps:
 * ['userService']`, for the plugins that administer or show them. Records
 * are MikroORM entities of the caller's EntityManager: change their fields,
 * then flush `ctx.em`, or use the methods here for changes with rules.
 */
export class UserService {
  readonly #deps: Deps;

  constructor(deps: Deps) {
    this.#deps = deps;
  }

  /** A complete user record from the fields that matter, every other field at its default. */
  newUser(fields: NewUser): User {
    const now = new Date();
    return {
      id: randomUUID(),
      passwordHash: null,
      firstName: null,
      lastName: null,
      isActive: true,
      isVerified: false,
      isPhoneVerified: false,
      phoneNumber: null,
      onboardingCompleted: false,
      oauthProfiles: [],
      declaredProfiles: [],
      emailProven: null,
      emailProvenBy: null,
      partnerContactId: null,
      profilePicture: null,
      jobTitle: null,
      department: null,
      serviceCode: null,
      createdAt: now,
      updatedAt: now,
      ...fields,
    } as User;
  }

  view = toUserView;
  adminRecord = toAdminUserRecord;
  /** What AdminUserRpc's lists filter and sort by: the columns of the administrators' record. */
  adminFields = ADMIN_USER_FIELDS;

  /**
   * E-mail addresses and usernames are unique across the whole service,
   * case-insensitively, since login takes either without naming a subscription.
   * The unique indexes enforce it; this gives the caller a clear message first.
   */
  async assertAvailable({ email, username }: { email?: string; username?: string }, exceptUserId?: string): Promise<void> {
    const [taken] = await this.#deps.db.execute<{ email_taken: boolean; username_taken: boolean }>(
      `select exists(select 1 from auth_user where lower(email) = lower(?) and id is distinct from ?) as email_taken,
              exists(select 1 from auth_user where lower(username) = lower(?) and id is distinct from ?) as username_taken`,
      [email ?? null, exceptUserId ?? null, username ?? null, exceptUserId ?? null],
    );
    if (email !== undefined && taken?.email_taken) throw conflict('This e-mail address is already registered');
    if (username !== undefined && taken?.username_taken) throw conflict('This username is already taken');
  }

  /** A user of the caller's subscription, or null. */
  findById({ em }: WithEm, id: string, populate: 'passwordHash'[] = []): Promise<User | null> {
    return em.findOne(User, { id }, { populate });
  }

  /** The calling user; UNAUTHENTICATED when the credential's user is gone. */
  async self(ctx: AuthenticatedContext, populate: 'passwordHash'[] = []): Promise<User> {
    const user = await this.findById(ctx, ctx.userId, populate);
    if (!user) throw new RpcError('UNAUTHENTICATED', 'The user of this credential no longer exists');
    return user;
  }

  /** The messaging contact a user is known by (partnerContactId), null when none is set. */
  async contactIdOf(subscriptionId: string, userId: string): Promise<string | null> {
    const [row] = await this.#deps.db.execute<{ partner_contact_id: string | null }>(
      'select partner_contact_id from auth_user where subscription_id = ? and id = ?',
      [subscriptionId, userId],
    );
    return row?.partner_contact_id ?? null;
  }

  /** The active users of a subscription known by these messaging contacts (partnerContactId). */
  async usersByContactIds(subscriptionId: string, contactIds: readonly string[]): Promise<string[]> {
    if (contactIds.length === 0) return [];
    const rows = await this.#deps.db.execute<{ id: string }>(
      'select id from auth_user where subscription_id = ? and is_active and partner_contact_id = any(?::text[])',
      [subscriptionId, pgArray(contactIds)],
    );
    return rows.map((row) => row.id);
  }

  /** The ids of a subscription's active users; with `among`, only those of these ids (anything else in it is left out). */
  async activeUserIds(subscriptionId: string, among?: readonly string[]): Promise<string[]> {
    const candidates = among ? pgArray(among.filter(isUuid)) : null;
    const rows = await this.#deps.db.execute<{ id: string }>(
      'select id from auth_user where subscription_id = ? and is_active and (?::uuid[] is null or id = any(?::uuid[])) order by id',
      [subscriptionId, candidates, candidates],
    );
    return rows.map((row) => row.id);
  }

  /** What a credential of this user stands for now; null when the subscription has no such user. */
  async credentialHolder(subscriptionId: string, userId: string): Promise<CredentialHolder | null> {
    const [row] = await this.#deps.db.execute<RowOf<User, 'role' | 'isActive'>>('select role, is_active from auth_user where subscription_id = ? and id = ?', [
      subscriptionId,
      userId,
    ]);
    return row ? { role: row.role, isActive: row.is_active } : null;
  }

  /** A user of the caller's subscription, made by an administrator; the provider profiles it is given are data (see `sortProfiles`). */
  async create(
    ctx: AuthenticatedContext,
    { password, oauthProfiles = [], ...fields }: Omit<NewUser, 'subscriptionId' | 'oauthProfiles'> & UserChanges & { password: string },
  ): Promise<User> {
    const { declared } = sortProfiles([], oauthProfiles);
    await this.assertAvailable(fields);
    const user = ctx.em.create(
      User,
      this.newUser({ ...fields, subscriptionId: ctx.subscriptionId, passwordHash: await hashPassword(password), declaredProfiles: declared }),
    );
    await ctx.em.flush();
    return user;
  }

  /** Records that the user's owner proved their present address (a code they received); flush `ctx.em` after. */
  emailProven(user: User, by: EmailProof): void {
    Object.assign(user, emailProof(user.email, by));
  }

  /** A page of the caller's subscription's users; `where` and `orderBy` are MikroORM conditions on the user entity. */
  page(
    ctx: AuthenticatedContext,
    query: { where: Record<string, unknown>; orderBy: Record<string, 'asc' | 'desc'>; limit: number; offset: number },
  ): Promise<[User[], number]> {
    return ctx.em.findAndCount(User, query.where, { orderBy: query.orderBy, limit: query.limit, offset: query.offset });
  }

  /** How many active admins the subscription has besides `exceptUserId`. */
  otherActiveAdmins(ctx: AuthenticatedContext, exceptUserId: string): Promise<number> {
    return ctx.em.count(User, { role: 'admin', isActive: true, id: { $ne: exceptUserId } });
  }

  /**
   * Changes fields of a user; a changed e-mail or username must be free, and
   * a changed role or active flag reaches every node's cached credentials at once.
   * `oauthProfiles` is the user's whole list: the links left out are removed,
   * entries that are not links are kept as data (see `sortProfiles`).
   */
  async update(ctx: AuthenticatedContext, user: User, { oauthProfiles, ...changes }: UserChanges): Promise<User> {
    const sorted = oauthProfiles === undefined ? undefined : sortProfiles(user.oauthProfiles, oauthProfiles);
    if (changes.email !== undefined || changes.username !== undefined) {
      await this.assertAvailable({ email: changes.email, username: changes.username }, user.id);
    }
    const credentialsChange =
      (changes.role !== undefined && changes.role !== user.role) || (changes.isActive !== undefined && changes.isActive !== user.isActive);
    await ctx.em.transactional(async (tx) => {
      tx.assign(user, sorted ? { ...changes, declaredProfiles: sorted.declared } : changes);
      for (const { provider, id } of sorted?.removed ?? []) await tx.nativeDelete(OAuthLink, { provider, subject: id, userId: user.id });
    });
    if (sorted && sorted.removed.length > 0) user.oauthProfiles = user.oauthProfiles.filter((link) => !sorted.removed.includes(link));
    if (credentialsChange) await this.#deps.credentials.changed({ userId: user.id });
    return user;
  }

  /**
   * Removes a user in one transaction with their sessions, their upload keys
   * and whatever other plugins keep for them (`auth.lifecycle` userRemoved).
   * Their files stay with the subscription.
   */
  async remove(ctx: AuthenticatedContext, user: User): Promise<void> {
    const { db, uploadService, lifecycle, credentials } = this.#deps;
    await db.forkEm(ctx.subscriptionId).transactional(async (em) => {
      await lifecycle.userRemoved({ userId: user.id, subscriptionId: user.subscriptionId, em });
      await uploadService.forgetUser(em, user.id);
      await em.nativeDelete(Session, { userId: user.id });
      await em.nativeDelete(OAuthLink, { userId: user.id });
      await em.nativeDelete(User, { id: user.id });
    });
    await credentials.changed({ userId: user.id });
  }

  /**
   * The person who proved they own `email` (by `by`) joins the user that has
   * it, an account someone else may have made (join.service.ts). In one
   * transaction (nothing is done when `within` answers false): the address
   * is proven theirs, and every way back someone else may hold into the
   * account ends: its password, its sessions, its provider links (all but the
   * one `within` makes for this join), its phone and that phone's
   * verification, and what other plugins keep that acts as the user
   * (`auth.lifecycle` accountClaimed: API keys, and so their webhooks;
   * scheduled tasks). Then every node forgets the user's cached credentials.
   */
  async claim(user: User, email: string, by: EmailProof, within?: (tx: EntityManager) => Promise<boolean>): Promise<boolean> {
    const { db, lifecycle, credentials } = this.#deps;
    const notMade = new Error('the join made nothing');
    try {
      await db.forkEm(user.subscriptionId).transactional(async (tx) => {
        // The links go before `within` makes the join's own; when it makes none, the rollback keeps them.
        await tx.nativeDelete(OAuthLink, { userId: user.id });
        if (within && !(await within(tx))) throw notMade;
        await tx.nativeUpdate(User, { id: user.id }, { ...emailProof(email, by), passwordHash: null, phoneNumber: null, isPhoneVerified: false });
        await tx.nativeDelete(Session, { userId: user.id });
        await lifecycle.accountClaimed({ userId: user.id, subscriptionId: user.subscriptionId, em: tx });
      });
    } catch (err) {
      if (err === notMade) return false;
      throw err;
    }
    await credentials.changed({ userId: user.id });
    return true;
  }

  /** Sets a new password and ends every session of the user, except `keepSessionId` when given. */
  async setPassword(ctx: WithEm, user: User, newPassword: string, keepSessionId?: string): Promise<void> {
    user.passwordHash = await hashPassword(newPassword);
    await ctx.em.flush();
    await this.#deps.sessionService.revokeAllOfUser(user.subscriptionId, user.id, keepSessionId);
  }

  /**
   * The calling user changes their own password. Failed attempts count per
   * user like failed logins; past the limit even the right password is
   * refused until the window ends. Every other session of the user ends, so a
   * stolen session dies with the old password.
   */
  async changePassword(ctx: AuthenticatedContext, currentPassword: string, newPassword: string): Promise<void> {
    const user = await this.confirmPassword(ctx, currentPassword, 'currentPassword');
    await this.setPassword(ctx, user, newPassword, ctx.sessionId ?? undefined);
  }

  /**
   * The calling user, once they gave their password again (a password change,
   * a step-up). Failed attempts count per user like failed logins; past the
   * limit even the right password is refused until the window ends.
   */
  async confirmPassword(ctx: AuthenticatedContext, password: string, path = 'password'): Promise<User> {
    const { rateLimiter, config } = this.#deps;
    const bucket = RateLimiter.bucket('password-change', ctx.userId);
    const user = await this.self(ctx, ['passwordHash']);
    if (!user.passwordHash) {
      throw badRequest('This account has no password (it signs in another way); an administrator can set one with AdminUserRpc.resetPassword');
    }
    // Counted before it is checked, in one statement: attempts sent together cannot all be tried before any is counted.
    await rateLimiter.take(bucket, config.loginFailureLimit, config.loginFailureWindowSeconds);
    if (!(await verifyPassword(password, user.passwordHash))) throw validationError([{ path, message: 'The password is incorrect' }]);
    await rateLimiter.reset([bucket]);
    return user;
  }

  /**
   * The user with this address (lowercased) in any subscription: a sign-in
   * that proves an address (a provider's verified one) finds its account
   * before the tenant is known; addresses are unique across the service.
   */
  async withEmail(email: string): Promise<{ subscriptionId: string; id: string } | undefined> {
    const [row] = await this.#deps.db.execute<RowOf<User, 'subscriptionId' | 'id'>>('select subscription_id, id from auth_user where lower(email) = ?', [
      email,
    ]);
    return row && { subscriptionId: row.subscription_id, id: row.id };
  }

  /** A user for a login that has found their subscription and id (by password, code or OAuth), before any caller is known; null when gone. */
  findForLogin(subscriptionId: string, id: string): Promise<User | null> {
    return this.#deps.db.forkEm(subscriptionId).findOne(User, { subscriptionId, id });
  }
}

/**
 * Sorts the `oauthProfiles` an administrator sends for a user whose links are
 * `links`. An entry naming one of the links keeps it, and the links left out
 * are `removed`; every other entry is `declared`: data, kept and shown, which
 * signs nobody in. Only signing in with the provider links an account
 * (oauth.service.ts), so an entry claiming to be a link (`linked: true`) that
 * is none of the user's is refused, with the same answer whether or not it is
 * linked to anyone else: the caller learns nothing of other users.
 */
function sortProfiles(links: readonly OAuthProfile[], given: readonly ProfileInput[]): { removed: OAuthProfile[]; declared: DeclaredProfile[] } {
  const same = (a: { provider: string; id: string }, b: { provider: string; id: string }) => a.provider === b.provider && a.id === b.id;
  const issues: { path: string; message: string }[] = [];
  const declared: DeclaredProfile[] = [];
  given.forEach((entry, index) => {
    const path = `oauthProfiles.${index}`;
    const link = links.find((own) => same(own, entry));
    if (given.findIndex((other) => same(other, entry)) < index) issues.push({ path, message: 'This provider account is listed twice' });
    else if (link) {
      if (entry.email !== undefined && entry.email !== link.email)
        issues.push({ path: `${path}.email`, message: 'This is not the address the link was made with' });
      if (entry.linked === false) issues.push({ path: `${path}.linked`, message: 'This provider account is linked; leave it out to remove the link' });
    } else if (entry.linked === true) {
      issues.push({ path, message: 'A provider account is linked to a user only by signing in with it; this user has no such link to keep' });
    } else if (entry.email !== undefined) {
      issues.push({ path: `${path}.email`, message: 'Only a link has an address (the one the provider gave); a declared profile has none' });
    } else declared.push({ provider: entry.provider, id: entry.id });
  });
  if (issues.length > 0) throw validationError(issues);
  return { removed: links.filter((own) => !given.some((entry) => same(own, entry))), declared };
}

export type { AdminUserRecord, UserView };
