import { Migration } from 'rpc-service/plugin';

export class Migration20261123230425_initial extends Migration {
  override async up(): Promise<void> {
    this.addSql(
      `create table "memory_memory" ("id" uuid not null, "subscription_id" uuid not null, "scope" text check ("scope" in ('user', 'global')) not null, "user_id" uuid null, "content" text not null, "content_hash" text not null, "metadata" jsonb not null, "embedding" vector(384) not null, "created_at" timestamptz not null, "updated_at" timestamptz not null, constraint "memory_memory_pkey" primary key ("id"));`,
    );
    this.addSql(
      `create index "memory_memory_subscription_id_scope_user_id_created_at_index" on "memory_memory" ("subscription_id", "scope", "user_id", "created_at");`,
    );
    this.addSql(
      `create index "memory_memory_embedding_index" on "memory_memory" using hnsw ("embedding" vector_cosine_ops) with (m = 24, ef_construction = 128);`,
    );
    this.addSql(
      `create unique index "memory_memory_content_unique" on "memory_memory" ("subscription_id", "scope", coalesce("user_id", '00000000-0000-0000-0000-000000000000'), "content_hash");`,
    );
  }

  override async down(): Promise<void> {
    this.addSql(`drop table if exists "memory_memory" cascade;`);
  }
}
