import * as v from 'valibot';
import { defineExtensionPoint } from 'rpc-service/plugin';

/**
 * Fields of an API key record that another plugin keeps: ApiManagementRpc
 * keeps the webhook of a key (`webhookUrl`, `webhookSecret`, masked,
 * `webhookStatus`, `lastTestedAt`). A contributed `updatedAt` counts when it
 * is later than the key's own. Timestamps are ISO 8601 text, as in the record.
 */
export interface ContributedFields {
  webhookUrl?: string | null;
  webhookSecret?: string | null;
  webhookStatus?: string | null;
  lastTestedAt?: string | null;
  updatedAt?: string;
}

/** A contribution to `api-key.recordFields`: the fields it keeps for some keys of a subscription, by key id. */
export interface RecordFieldsContribution {
  fields(subscriptionId: string, apiKeyIds: readonly string[]): Promise<ReadonlyMap<string, ContributedFields>>;
}

export const recordFieldsPoint = defineExtensionPoint({
  id: 'api-key.recordFields',
  describe: 'Fields of the API key records ApiKeyRpc returns that another plugin keeps (the webhook of a key).',
  contribution: v.object({ fields: v.function() }),
});
