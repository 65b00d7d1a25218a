import { definePlugin } from '../../core/plugin/define.ts';
import { create, getData, remove, update } from './operations.ts';

/** ApiKeyRpc: the calling user's API keys. Storage and authentication live in core/auth/api-keys.ts. */
export const apiKeyPlugin = definePlugin({
  id: 'api-key',
  group: 'ApiKeyRpc',
  coreVersion: '^1.0.0',
  operations: { getData, create, update, delete: remove },
});
