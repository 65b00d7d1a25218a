// Written by `npm run migration:create`: the migrations of this folder, oldest first.
import { Migration20261123171538_initial } from './Migration20261123171538_initial.ts';
import { Migration20261123215714_keyring_and_audit } from './Migration20261123215714_keyring_and_audit.ts';
import { Migration20261123224152_ai_trace } from './Migration20261123224152_ai_trace.ts';
import { Migration20261124144132_embedding_state } from './Migration20261124144132_embedding_state.ts';
import { Migration20261124161545_notifications } from './Migration20261124161545_notifications.ts';
import { Migration20261125162418_notification_dedupe_key } from './Migration20261125162418_notification_dedupe_key.ts';
import { Migration20261126105015_blob_storage } from './Migration20261126105015_blob_storage.ts';
import { Migration20261126154909_tenant_keys } from './Migration20261126154909_tenant_keys.ts';

export const migrations = [
  Migration20261123171538_initial,
  Migration20261123215714_keyring_and_audit,
  Migration20261123224152_ai_trace,
  Migration20261124144132_embedding_state,
  Migration20261124161545_notifications,
  Migration20261125162418_notification_dedupe_key,
  Migration20261126105015_blob_storage,
  Migration20261126154909_tenant_keys,
];
