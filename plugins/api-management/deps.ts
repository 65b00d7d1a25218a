import { jobBuilder, operationBuilder, type Deps } from 'rpc-service/plugin';
import type { ApiManagementConfig } from './config.ts';
import type { WebhookStore } from './webhook-store.ts';
import type { WebhookService } from './webhook.service.ts';

/** What ApiManagementRpc uses: its tables, jobs, the outbound guard, the bus's events, the keyring for webhook secrets, and the API-key plugin's keys. */
export const DEPS = ['db', 'bus', 'jobs', 'outbound', 'keyring', 'secretBox', 'apiKeyService'] as const;

export type ApiManagementDeps = Deps<typeof DEPS, { webhookService: WebhookService; webhookStore: WebhookStore }, ApiManagementConfig>;

export const defineOperation = operationBuilder<ApiManagementDeps>();
export const defineJob = jobBuilder<ApiManagementDeps>();
