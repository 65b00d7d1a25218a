import { Migration } from 'rpc-service/plugin';

export class Migration20261124003915_exact_search_index extends Migration {
  override async up(): Promise<void> {
    this.addSql(`create index "memory_memory_exact_search_index" on "memory_memory" ("subscription_id", "scope", "user_id") include ("id", "embedding");`);
  }

  override async down(): Promise<void> {
    this.addSql(`drop index "memory_memory_exact_search_index";`);
  }
}
