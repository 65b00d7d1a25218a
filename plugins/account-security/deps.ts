import { jobBuilder, operationBuilder, type Deps } from 'rpc-service/plugin';
import type { AccountSecurityService } from './account-security.service.ts';
import type { AccountSecurityConfig } from './config.ts';

/** The core services this plugin uses, and the auth plugin's users, sessions and sign-ins. */
export const DEPS = ['db', 'keyring', 'rateLimiter', 'bus', 'userService', 'sessionService', 'signInService'] as const;

export type AccountSecurityDeps = Deps<typeof DEPS, { accountSecurityService: AccountSecurityService }, AccountSecurityConfig>;

export const defineOperation = operationBuilder<AccountSecurityDeps>();
export const defineJob = jobBuilder<AccountSecurityDeps>();
