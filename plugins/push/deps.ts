import { operationBuilder, type Deps } from 'rpc-service/plugin';
import type { PushService } from './push.service.ts';

/** What PushNotificationRpc uses: the database (the VAPID keys, made once), the keyring (the private key at rest) and the outbound guard (endpoints). */
export const DEPS = ['db', 'keyring', 'outbound'] as const;

export type PushDeps = Deps<typeof DEPS, { pushService: PushService }>;

export const defineOperation = operationBuilder<PushDeps>();
