import { operationBuilder, type Deps } from 'rpc-service/plugin';
import type { SecretsService } from './secrets.service.ts';

/** What SecretsRpc uses: the keyring that seals values, the audit log and the event bus. */
export const DEPS = ['keyring', 'audit', 'bus'] as const;

export type SecretsDeps = Deps<typeof DEPS, { secretsService: SecretsService }>;

export const defineOperation = operationBuilder<SecretsDeps>();
