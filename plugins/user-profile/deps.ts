import { operationBuilder, type Deps } from 'rpc-service/plugin';
import type { UserProfileService } from './user-profile.service.ts';

/** The auth plugin's users and one-time codes, and the core's uploads. */
export const DEPS = ['userService', 'verificationService', 'uploadService'] as const;

export type UserProfileDeps = Deps<typeof DEPS, { userProfileService: UserProfileService }>;

export const defineOperation = operationBuilder<UserProfileDeps>();
