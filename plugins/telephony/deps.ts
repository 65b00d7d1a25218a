import { operationBuilder, type Deps } from 'rpc-service/plugin';
import type { TelephonyConfig } from './config.ts';
import type { TelephonyService } from './telephony.service.ts';

/** What TelephonyManagerRpc uses: the outbound guard (the http provider's requests) and the auth plugin's users (assignees). */
export const DEPS = ['outbound', 'userService'] as const;

export type TelephonyDeps = Deps<typeof DEPS, { telephonyService: TelephonyService }, TelephonyConfig>;

export const defineOperation = operationBuilder<TelephonyDeps>();
