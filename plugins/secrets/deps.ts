import { operationBuilder, type Deps } from 'rpc-service/plugin';
import type { SecretsService } from './secrets.service.ts';

/** What SecretsRpc uses: the keyring that seals values, the audit log, the event bus, and the database for the value's prepared read. */
export const DEPS = ['keyring', 'audit', 'bus', 'db'] as const;

export type SecretsDeps = Deps<typeof DEPS, { secretsService: SecretsService }>;

export const defineOperation = operationBuilder<SecretsDeps>();
