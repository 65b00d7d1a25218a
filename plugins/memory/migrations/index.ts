// Written by `npm run migration:create`: the migrations of this folder, oldest first.
import { Migration20261123230425_initial } from './Migration20261123230425_initial.ts';
import { Migration20261124003915_exact_search_index } from './Migration20261124003915_exact_search_index.ts';
import { Migration20261124144254_model_switch } from './Migration20261124144254_model_switch.ts';
import { Migration20261125221702_subscription_scoped_id } from './Migration20261125221702_subscription_scoped_id.ts';
import { Migration20261126011353_rename_table } from './Migration20261126011353_rename_table.ts';
import { Migration20261207145200_search_words } from './Migration20261207145200_search_words.ts';

export const migrations = [
  Migration20261123230425_initial,
  Migration20261124003915_exact_search_index,
  Migration20261124144254_model_switch,
  Migration20261125221702_subscription_scoped_id,
  Migration20261126011353_rename_table,
  Migration20261207145200_search_words,
];
