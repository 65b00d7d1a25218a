import { Migration } from 'rpc-service/plugin';

/** The constraints and indexes named after the table, by what follows its name. */
const NAMED_AFTER_IT = {
  constraints: ['pkey', 'scope_check'],
  indexes: [
    'subscription_id_scope_user_id_created_at_index',
    'exact_search_a_index',
    'embedding_a_index',
    'pending_a_index',
    'exact_search_b_index',
    'embedding_b_index',
    'pending_b_index',
    'content_unique',
  ],
};

/** The table is named after the plugin alone (`memory`, not `memory_memory`); its rows, constraints and indexes are kept and renamed with it. */
export class Migration20261126011353_rename_table extends Migration {
  override async up(): Promise<void> {
    this.renameTable('memory_memory', 'memory', NAMED_AFTER_IT);
    // The state of its embedding columns (core/ai/embedding-columns.ts) is keyed by the table's name.
    this.addSql(`update "core_embedding_state" set "table_name" = 'memory' where "table_name" = 'memory_memory';`);
  }

  override async down(): Promise<void> {
    this.addSql(`update "core_embedding_state" set "table_name" = 'memory_memory' where "table_name" = 'memory';`);
    this.renameTable('memory', 'memory_memory', NAMED_AFTER_IT);
  }
}
