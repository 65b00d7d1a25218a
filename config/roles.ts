/** Role names a user can have. `admin` owns the subscription; `agent` is for AI agents acting for users. */
export const ROLES = ['admin', 'staff', 'user', 'agent'] as const;
export type Role = (typeof ROLES)[number];
