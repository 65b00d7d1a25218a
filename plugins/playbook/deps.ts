import { operationBuilder, type Deps } from 'rpc-service/plugin';
import type { PlaybookService } from './playbook.service.ts';

/** What PlaybookRpc uses: uploads (resource files). */
export const DEPS = ['uploadService'] as const;

export type PlaybookDeps = Deps<typeof DEPS, { playbookService: PlaybookService }>;

export const defineOperation = operationBuilder<PlaybookDeps>();
