import { operationBuilder, type Deps } from 'rpc-service/plugin';
import type { AdminUserService } from './admin-user.service.ts';

/** The auth plugin's users and invite codes, and the core's uploads (a deleted user's picture). */
export const DEPS = ['userService', 'inviteCodeService', 'uploadService'] as const;

export type AdminUserDeps = Deps<typeof DEPS, { adminUserService: AdminUserService }>;

export const defineOperation = operationBuilder<AdminUserDeps>();
