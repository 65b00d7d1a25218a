import { commonRole, type Role } from '../../config/roles.ts';
import type { CallerLimits, Principal, RequestContext } from '../base/context.ts';
import { forbidden } from '../base/errors.ts';

/**
 * One person who shaped what a stored action does (a scheduled task, a
 * workflow, a webhook): who, and what the credential they used narrowed them
 * to (an API key's scopes and read-only flag), kept with the action as JSON.
 */
export interface Author {
  userId: string;
  /** The role they acted with when they shaped it: a caller that was itself a stored action's acts with at most its role, not the user's own. */
  role?: Role;
  scopes?: readonly string[];
  readOnly?: true;
  /** They shaped it from a session that had not proved itself recently (RequestContext.steppedUp): it may not do what needs a step-up. */
  unconfirmed?: true;
}

/** A link of the chain an action acts through: an author, or someone who only bounds it (`vouches: false`). */
export interface ChainLink extends Author {
  /** Whether, among people of the same role, this one takes the action over (the latest to save it); false for who only sends it data (an event). */
  vouches?: boolean;
}

/** What a user's credential stands for now, as `userService.credentialHolder` answers. */
export type HolderOf = (userId: string) => Promise<{ role: Role; isActive: boolean } | null>;

/** The caller of a request as an author: their user and their credential's limits. */
export function authorOf(ctx: Pick<RequestContext, 'userId' | 'role' | 'limits'> & Partial<Pick<RequestContext, 'steppedUp'>> & { userId: string }): Author {
  const limits = ctx.limits;
  return {
    userId: ctx.userId,
    ...(ctx.role ? { role: ctx.role } : {}),
    ...(limits?.scopes ? { scopes: [...limits.scopes] } : {}),
    ...(limits?.readOnly ? { readOnly: true as const } : {}),
    ...(ctx.steppedUp === false ? { unconfirmed: true as const } : {}),
  };
}

/** The authors with `author` as the latest: a person who saves again moves to the end, with the credential they used this time. */
export function withAuthor(authors: readonly Author[], author: Author): Author[] {
  return [...authors.filter((each) => each.userId !== author.userId), author];
}

/** The chain with someone who only bounds it (an event's sender) added: once for the same person and credential limits. */
export function withBound(chain: readonly ChainLink[], sender: Author): ChainLink[] {
  const same = (link: ChainLink) =>
    link.userId === sender.userId &&
    link.role === sender.role &&
    link.readOnly === sender.readOnly &&
    link.unconfirmed === sender.unconfirmed &&
    JSON.stringify(link.scopes ?? null) === JSON.stringify(sender.scopes ?? null);
  return chain.some(same) ? [...chain] : [...chain, { ...sender, vouches: false }];
}

/**
 * Scopes both lists allow: a group in one and one of its operations in the
 * other give the operation; null (no limit) gives the other list.
 */
export function commonScopes(a: readonly string[] | null, b: readonly string[] | null): string[] | null {
  if (a === null) return b === null ? null : [...b];
  if (b === null) return [...a];
  const common = new Set<string>();
  for (const x of a) {
    for (const y of b) {
      if (x === y || y.startsWith(`${x}.`)) common.add(y);
      else if (x.startsWith(`${y}.`)) common.add(x);
    }
  }
  return [...common];
}

/**
 * The caller a stored action acts as when it runs: the least-privileged of
 * the people in its chain (the user it acts for, its creator, every later
 * editor, whoever started or fed a run), with their role now and every key
 * limit any of them saved it under (docs/decisions/0056-rights-travel-with-the-work.md).
 * Among several people of that role, the latest who vouches for
 * it (saved or started it) is the one it acts as. Throws FORBIDDEN when
 * someone of the chain is no longer an active user of the subscription: their
 * part in it can no longer be vouched for.
 */
export async function actingPrincipal(
  subscriptionId: string,
  chain: readonly ChainLink[],
  holderOf: HolderOf,
  initialContext: Record<string, unknown> | null = null,
): Promise<Principal> {
  if (chain.length === 0) throw new Error('A stored action has nobody to act as');
  const roles = new Map<string, Role>();
  for (const userId of new Set(chain.map((link) => link.userId))) {
    const holder = await holderOf(userId);
    if (!holder?.isActive) throw forbidden(`User ${userId}, who shaped what this does, is no longer active`);
    roles.set(userId, holder.role);
  }
  // Each person counts with the rights they have now or had when they shaped it, whichever are fewer.
  const roleOf = (link: ChainLink) => (link.role ? commonRole(roles.get(link.userId)!, link.role) : roles.get(link.userId)!);
  let actor = chain[0]!;
  let role = roleOf(actor);
  let scopes: readonly string[] | null = null;
  let readOnly = false;
  let unconfirmed = false;
  for (const [index, link] of chain.entries()) {
    const own = roleOf(link);
    const common = commonRole(role, own);
    // A weaker (or not comparable) link takes the action over; among equals, the latest who vouches for it.
    if (index > 0 && (common !== role || (own === role && link.vouches !== false))) actor = link;
    role = common;
    scopes = commonScopes(scopes, link.scopes ?? null);
    readOnly ||= link.readOnly === true;
    unconfirmed ||= link.unconfirmed === true;
  }
  const limits: CallerLimits | undefined = scopes !== null || readOnly ? { scopes, readOnly, perMinute: null } : undefined;
  return {
    subscriptionId,
    userId: actor.userId,
    role,
    apiKeyId: null,
    sessionId: null,
    initialContext,
    ...(limits ? { limits } : {}),
    ...(unconfirmed ? { unconfirmed: true as const } : {}),
  };
}
