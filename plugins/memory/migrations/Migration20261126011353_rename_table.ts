import { Migration } from 'rpc-service/plugin';

/** The table is named after the plugin alone (`memory`, not `memory_memory`); its rows, constraints and indexes are kept and renamed with it. */
export class Migration20261126011353_rename_table extends Migration {

  override async up(): Promise<void> {
    this.addSql(`alter table "memory_memory" rename to "memory";`);
    this.addSql(`alter table "memory" rename constraint "memory_memory_pkey" to "memory_pkey";`);
    this.addSql(`alter table "memory" rename constraint "memory_memory_scope_check" to "memory_scope_check";`);
    this.addSql(`alter index "memory_memory_subscription_id_scope_user_id_created_at_index" rename to "memory_subscription_id_scope_user_id_created_at_index";`);
    this.addSql(`alter index "memory_memory_exact_search_a_index" rename to "memory_exact_search_a_index";`);
    this.addSql(`alter index "memory_memory_embedding_a_index" rename to "memory_embedding_a_index";`);
    this.addSql(`alter index "memory_memory_pending_a_index" rename to "memory_pending_a_index";`);
    this.addSql(`alter index "memory_memory_exact_search_b_index" rename to "memory_exact_search_b_index";`);
    this.addSql(`alter index "memory_memory_embedding_b_index" rename to "memory_embedding_b_index";`);
    this.addSql(`alter index "memory_memory_pending_b_index" rename to "memory_pending_b_index";`);
    this.addSql(`alter index "memory_memory_content_unique" rename to "memory_content_unique";`);
    // The state of its embedding columns (core/ai/embedding-columns.ts) is keyed by the table's name.
    this.addSql(`update "core_embedding_state" set "table_name" = 'memory' where "table_name" = 'memory_memory';`);
  }

  override async down(): Promise<void> {
    this.addSql(`update "core_embedding_state" set "table_name" = 'memory_memory' where "table_name" = 'memory';`);
    this.addSql(`alter index "memory_content_unique" rename to "memory_memory_content_unique";`);
    this.addSql(`alter index "memory_pending_b_index" rename to "memory_memory_pending_b_index";`);
    this.addSql(`alter index "memory_embedding_b_index" rename to "memory_memory_embedding_b_index";`);
    this.addSql(`alter index "memory_exact_search_b_index" rename to "memory_memory_exact_search_b_index";`);
    this.addSql(`alter index "memory_pending_a_index" rename to "memory_memory_pending_a_index";`);
    this.addSql(`alter index "memory_embedding_a_index" rename to "memory_memory_embedding_a_index";`);
    this.addSql(`alter index "memory_exact_search_a_index" rename to "memory_memory_exact_search_a_index";`);
    this.addSql(`alter index "memory_subscription_id_scope_user_id_created_at_index" rename to "memory_memory_subscription_id_scope_user_id_created_at_index";`);
    this.addSql(`alter table "memory" rename constraint "memory_scope_check" to "memory_memory_scope_check";`);
    this.addSql(`alter table "memory" rename constraint "memory_pkey" to "memory_memory_pkey";`);
    this.addSql(`alter table "memory" rename to "memory_memory";`);
  }

}
