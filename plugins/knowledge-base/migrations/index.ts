// Written by `npm run migration:create`: the migrations of this folder, oldest first.
import { Migration20261124014426_initial } from './Migration20261124014426_initial.ts';
import { Migration20261124144212_shared_embedding_state } from './Migration20261124144212_shared_embedding_state.ts';
import { Migration20261124145247_url_ingestion } from './Migration20261124145247_url_ingestion.ts';
import { Migration20261126154932_tenant_keys } from './Migration20261126154932_tenant_keys.ts';
import { Migration20261126192956_common_words } from './Migration20261126192956_common_words.ts';
import { Migration20261207125813_source_stats } from './Migration20261207125813_source_stats.ts';
import { Migration20261207152500_search_index_without_pending_list } from './Migration20261207152500_search_index_without_pending_list.ts';

export const migrations = [
  Migration20261124014426_initial,
  Migration20261124144212_shared_embedding_state,
  Migration20261124145247_url_ingestion,
  Migration20261126154932_tenant_keys,
  Migration20261126192956_common_words,
  Migration20261207125813_source_stats,
  Migration20261207152500_search_index_without_pending_list,
];
