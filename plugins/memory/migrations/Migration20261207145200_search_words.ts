import { Migration } from 'rpc-service/plugin';

export class Migration20261207145200_search_words extends Migration {
  override async up(): Promise<void> {
    // Memories saved before recall ranked by words get theirs here.
    this.addSql(`alter table "memory" add column "search_vector" tsvector null;`);
    this.addSql(`update "memory" set "search_vector" = to_tsvector('english', "content");`);
    this.addSql(`alter table "memory" alter column "search_vector" set not null;`);
    this.addSql(`create index "memory_search_vector_index" on "memory" using gin ("search_vector") with (fastupdate = off);`);
  }

  override async down(): Promise<void> {
    this.addSql(`drop index "memory_search_vector_index";`);
    this.addSql(`alter table "memory" drop column "search_vector";`);
  }
}
