/** Role names a user can have. `admin` owns the subscription; `agent` is for AI agents acting for users. */
export const ROLES = ['admin', 'staff', 'user', 'agent'] as const;
export type Role = (typeof ROLES)[number];

/** Roles that may change any shared record of their subscription; the other roles change the records they created. */
const MANAGER_ROLES: ReadonlySet<Role> = new Set(['admin', 'staff']);

/** Whether the role may change every shared record of its subscription. */
export const isManager = (role: Role): boolean => MANAGER_ROLES.has(role);

/** Whether the caller may change a shared record (an agent configuration, a workflow) that `creatorId` created. */
export const mayChangeRecordOf = (caller: { userId: string; role: Role }, creatorId: string): boolean => creatorId === caller.userId || isManager(caller.role);

/** The roles each role holds every right of: an admin's include staff's and agents', every role's include a member's. */
const INCLUDES: Record<Role, readonly Role[]> = { admin: ['staff', 'agent', 'user'], staff: ['user'], agent: ['user'], user: [] };

/**
 * The strongest role whose rights both roles hold: the weaker of two roles,
 * or `user` for staff and agent, who each have a right the other lacks
 * (agents act for other users, staff change any shared record).
 */
export function commonRole(a: Role, b: Role): Role {
  if (a === b || INCLUDES[a].includes(b)) return b;
  if (INCLUDES[b].includes(a)) return a;
  return 'user';
}
