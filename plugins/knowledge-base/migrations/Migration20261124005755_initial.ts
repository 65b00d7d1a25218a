import { Migration } from 'rpc-service/plugin';

export class Migration20261124005755_initial extends Migration {

  override async up(): Promise<void> {
    this.addSql(`create table "knowledge_base_chunk" ("id" uuid not null, "subscription_id" uuid not null, "source" text not null, "record_id" uuid not null, "collection" text null, "section_id" uuid not null, "ordinal" int not null, "heading" text not null, "text" text not null, "content_hash" text not null, "metadata" jsonb not null, "search_vector" tsvector not null, "embedding_a" vector(384) null, "embedding_b" vector(384) null, "withdrawn" boolean not null default false, "created_at" timestamptz not null, "updated_at" timestamptz not null, constraint "knowledge_base_chunk_pkey" primary key ("id"));`);
    this.addSql(`create index "knowledge_base_chunk_subscription_id_source_collection_index" on "knowledge_base_chunk" ("subscription_id", "source", "collection");`);
    this.addSql(`create index "knowledge_base_chunk_subscription_id_source_record_id_index" on "knowledge_base_chunk" ("subscription_id", "source", "record_id");`);
    this.addSql(`create index "knowledge_base_chunk_search_vector_index" on "knowledge_base_chunk" using gin ("search_vector");`);
    this.addSql(`create index "knowledge_base_chunk_embedding_a_index" on "knowledge_base_chunk" using hnsw ("embedding_a" vector_cosine_ops) with (m = 24, ef_construction = 128);`);
    this.addSql(`create index "knowledge_base_chunk_embedding_b_index" on "knowledge_base_chunk" using hnsw ("embedding_b" vector_cosine_ops) with (m = 24, ef_construction = 128);`);

    this.addSql(`create table "knowledge_base_section" ("id" uuid not null, "subscription_id" uuid not null, "source" text not null, "record_id" uuid not null, "ordinal" int not null, "heading" text not null, "text" text not null, constraint "knowledge_base_section_pkey" primary key ("id"));`);
    this.addSql(`create index "knowledge_base_section_subscription_id_source_record_id_index" on "knowledge_base_section" ("subscription_id", "source", "record_id");`);

    this.addSql(`create table "knowledge_base_index_state" ("id" int not null, "active_slot" text not null, "active_model" text not null, "next_model" text null, "switch_started_at" timestamptz null, "switched_at" timestamptz null, constraint "knowledge_base_index_state_pkey" primary key ("id"));`);
  }

  override async down(): Promise<void> {
    this.addSql(`drop table if exists "knowledge_base_chunk" cascade;`);

    this.addSql(`drop table if exists "knowledge_base_section" cascade;`);

    this.addSql(`drop table if exists "knowledge_base_index_state" cascade;`);
  }

}
