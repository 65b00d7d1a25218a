import { Migration } from 'rpc-service/plugin';

export class Migration20261207152500_search_index_without_pending_list extends Migration {
  override async up(): Promise<void> {
    // New words go straight into the index; those waiting in its pending list are merged now.
    this.addSql(`alter index "knowledge_base_chunk_search_vector_index" set (fastupdate = off);`);
    this.addSql(`select gin_clean_pending_list('knowledge_base_chunk_search_vector_index');`);
  }

  override async down(): Promise<void> {
    this.addSql(`alter index "knowledge_base_chunk_search_vector_index" reset (fastupdate);`);
  }
}
