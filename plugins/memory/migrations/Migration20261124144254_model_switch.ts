import { Migration } from 'rpc-service/plugin';

export class Migration20261124144254_model_switch extends Migration {
  override async up(): Promise<void> {
    // The embeddings stay: the column becomes the first of two (its HNSW index with it), the second starts empty.
    this.addSql(`drop index "memory_memory_exact_search_index";`);
    this.addSql(`alter table "memory_memory" rename column "embedding" to "embedding_a";`);
    this.addSql(`alter table "memory_memory" alter column "embedding_a" drop not null;`);
    this.addSql(`alter index "memory_memory_embedding_index" rename to "memory_memory_embedding_a_index";`);
    this.addSql(`alter table "memory_memory" add column "embedding_b" vector(384) null;`);
    // Both vectors stay in the row (compressed if need be) rather than in a TOAST table a search would read row by row.
    this.addSql(`alter table "memory_memory" alter column "embedding_a" set storage main, alter column "embedding_b" set storage main;`);
    this.addSql(
      `create index "memory_memory_exact_search_a_index" on "memory_memory" ("subscription_id", "scope", "user_id") include ("id", "embedding_a") where "embedding_a" is not null;`,
    );
    this.addSql(`create index "memory_memory_pending_a_index" on "memory_memory" ("subscription_id") where "embedding_a" is null;`);
    this.addSql(
      `create index "memory_memory_exact_search_b_index" on "memory_memory" ("subscription_id", "scope", "user_id") include ("id", "embedding_b") where "embedding_b" is not null;`,
    );
    this.addSql(
      `create index "memory_memory_embedding_b_index" on "memory_memory" using hnsw ("embedding_b" vector_cosine_ops) with (m = 24, ef_construction = 128);`,
    );
    this.addSql(`create index "memory_memory_pending_b_index" on "memory_memory" ("subscription_id") where "embedding_b" is null;`);
  }

  override async down(): Promise<void> {
    // Keeps the active column's vectors, whichever it is.
    this.addSql(`drop index "memory_memory_exact_search_a_index";`);
    this.addSql(`drop index "memory_memory_pending_a_index";`);
    this.addSql(`drop index "memory_memory_exact_search_b_index";`);
    this.addSql(`drop index "memory_memory_embedding_b_index";`);
    this.addSql(`drop index "memory_memory_pending_b_index";`);
    this.addSql(
      `update "memory_memory" set "embedding_a" = "embedding_b" where exists (select 1 from "core_embedding_state" where "table_name" = 'memory_memory' and "active_slot" = 'b');`,
    );
    this.addSql(`delete from "memory_memory" where "embedding_a" is null;`);
    this.addSql(`delete from "core_embedding_state" where "table_name" = 'memory_memory';`);
    this.addSql(`alter table "memory_memory" drop column "embedding_b";`);
    this.addSql(`alter table "memory_memory" rename column "embedding_a" to "embedding";`);
    this.addSql(`alter table "memory_memory" alter column "embedding" set not null, alter column "embedding" set storage external;`);
    this.addSql(`alter index "memory_memory_embedding_a_index" rename to "memory_memory_embedding_index";`);
    this.addSql(`create index "memory_memory_exact_search_index" on "memory_memory" ("subscription_id", "scope", "user_id") include ("id", "embedding");`);
  }
}
