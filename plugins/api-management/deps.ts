import { jobBuilder, operationBuilder, type Deps } from 'rpc-service/plugin';
import type { ApiManagementConfig } from './config.ts';
import type { WebhookService } from './webhook.service.ts';

/** What ApiManagementRpc uses: its deliveries' table, jobs, the outbound guard, the bus's events, and the API-key plugin's keys. */
export const DEPS = ['db', 'bus', 'jobs', 'outbound', 'apiKeyService'] as const;

export type ApiManagementDeps = Deps<typeof DEPS, { webhookService: WebhookService }, ApiManagementConfig>;

export const defineOperation = operationBuilder<ApiManagementDeps>();
export const defineJob = jobBuilder<ApiManagementDeps>();
