import { operationBuilder, type Deps } from 'rpc-service/plugin';
import type { ScopedSecretsService } from './scoped-secrets.service.ts';

/** What SecretsManagerRpc uses: the keyring that seals values, the audit log and the event bus. */
export const DEPS = ['keyring', 'audit', 'bus'] as const;

export type SecretsManagerDeps = Deps<typeof DEPS, { scopedSecretsService: ScopedSecretsService }>;

export const defineOperation = operationBuilder<SecretsManagerDeps>();
