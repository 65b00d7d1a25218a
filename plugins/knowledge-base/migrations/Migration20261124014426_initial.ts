import { Migration } from 'rpc-service/plugin';

export class Migration20261124014426_initial extends Migration {
  override async up(): Promise<void> {
    this.addSql(
      `create table "knowledge_base_document_version" ("id" uuid not null, "subscription_id" uuid not null, "document_id" uuid not null, "version" int not null, "doc_type" text not null, "source" text null, "file_id" uuid null, "file_name" text null, "size_bytes" bigint not null, "markdown" text null, "created_by" uuid not null, "created_at" timestamptz not null, constraint "knowledge_base_document_version_pkey" primary key ("id"));`,
    );
    this.addSql(
      `create index "knowledge_base_document_version_subscription_id_do_a2891_index" on "knowledge_base_document_version" ("subscription_id", "document_id");`,
    );
    this.addSql(
      `alter table "knowledge_base_document_version" add constraint "knowledge_base_document_version_document_id_version_unique" unique ("document_id", "version");`,
    );

    this.addSql(
      `create table "knowledge_base_chunk" ("id" uuid not null, "subscription_id" uuid not null, "source" text not null, "record_id" uuid not null, "collection" text null, "section_id" uuid not null, "ordinal" int not null, "heading" text not null, "text" text not null, "content_hash" text not null, "metadata" jsonb not null, "search_vector" tsvector not null, "embedding_a" vector(384) null, "embedding_b" vector(384) null, "withdrawn" boolean not null default false, "created_at" timestamptz not null, "updated_at" timestamptz not null, constraint "knowledge_base_chunk_pkey" primary key ("id"));`,
    );
    // Embeddings and the full-text vector stay in the row (the text moves out first): comparing or ranking every candidate then
    // reads no TOAST table (test/bench/knowledge-base.ts: the full-text ranking of 2,500 matches went from 77 to 47 ms).
    this.addSql(
      `alter table "knowledge_base_chunk" alter column "embedding_a" set storage main, alter column "embedding_b" set storage main, alter column "search_vector" set storage main;`,
    );
    this.addSql(
      `create index "knowledge_base_chunk_subscription_id_source_collection_index" on "knowledge_base_chunk" ("subscription_id", "source", "collection");`,
    );
    this.addSql(
      `create index "knowledge_base_chunk_subscription_id_source_record_id_index" on "knowledge_base_chunk" ("subscription_id", "source", "record_id");`,
    );
    this.addSql(
      `create index "knowledge_base_chunk_pending_a_index" on "knowledge_base_chunk" ("subscription_id", "source", "collection") where "embedding_a" is null and not "withdrawn";`,
    );
    this.addSql(
      `create index "knowledge_base_chunk_pending_b_index" on "knowledge_base_chunk" ("subscription_id", "source", "collection") where "embedding_b" is null and not "withdrawn";`,
    );
    this.addSql(`create index "knowledge_base_chunk_search_vector_index" on "knowledge_base_chunk" using gin ("search_vector");`);
    this.addSql(
      `create index "knowledge_base_chunk_embedding_a_index" on "knowledge_base_chunk" using hnsw ("embedding_a" vector_cosine_ops) with (m = 24, ef_construction = 128);`,
    );
    this.addSql(
      `create index "knowledge_base_chunk_embedding_b_index" on "knowledge_base_chunk" using hnsw ("embedding_b" vector_cosine_ops) with (m = 24, ef_construction = 128);`,
    );

    this.addSql(
      `create table "knowledge_base_section" ("id" uuid not null, "subscription_id" uuid not null, "source" text not null, "record_id" uuid not null, "ordinal" int not null, "heading" text not null, "text" text not null, constraint "knowledge_base_section_pkey" primary key ("id"));`,
    );
    this.addSql(
      `create index "knowledge_base_section_subscription_id_source_record_id_index" on "knowledge_base_section" ("subscription_id", "source", "record_id");`,
    );

    this.addSql(
      `create table "knowledge_base_index_state" ("id" int not null, "active_slot" text not null, "active_model" text not null, "next_model" text null, "inactive_dirty" boolean not null default false, "lease_until" timestamptz null, "switch_started_at" timestamptz null, "switched_at" timestamptz null, constraint "knowledge_base_index_state_pkey" primary key ("id"));`,
    );

    this.addSql(
      `create table "knowledge_base_ingestion" ("id" uuid not null, "subscription_id" uuid not null, "document_id" uuid not null, "version" int not null, "state" text check ("state" in ('queued', 'running', 'done', 'failed', 'cancelled')) not null, "error" text null, "job_id" uuid null, "created_by" uuid not null, "created_at" timestamptz not null, "started_at" timestamptz null, "finished_at" timestamptz null, constraint "knowledge_base_ingestion_pkey" primary key ("id"));`,
    );
    this.addSql(`create index "knowledge_base_ingestion_subscription_id_created_at_index" on "knowledge_base_ingestion" ("subscription_id", "created_at");`);
    this.addSql(`create index "knowledge_base_ingestion_subscription_id_document_id_index" on "knowledge_base_ingestion" ("subscription_id", "document_id");`);

    this.addSql(
      `create table "knowledge_base_document" ("id" uuid not null, "subscription_id" uuid not null, "name" text not null, "description" text not null, "collection" text null, "tags" jsonb not null, "doc_type" text not null, "source_type" text check ("source_type" in ('text', 'file')) not null, "user_id" uuid null, "contact_id" text null, "project_id" text null, "status" text check ("status" in ('pending', 'processing', 'ready', 'failed', 'deleted')) not null, "error" text null, "version" int not null, "chunk_count" int not null, "size_bytes" bigint not null, "search_vector" tsvector null, "created_by" uuid not null, "created_at" timestamptz not null, "updated_at" timestamptz not null, "deleted_at" timestamptz null, constraint "knowledge_base_document_pkey" primary key ("id"));`,
    );
    this.addSql(
      `create index "knowledge_base_document_subscription_id_status_created_at_index" on "knowledge_base_document" ("subscription_id", "status", "created_at");`,
    );
    this.addSql(`create index "knowledge_base_document_subscription_id_collection_index" on "knowledge_base_document" ("subscription_id", "collection");`);
    this.addSql(`create index "knowledge_base_document_search_vector_index" on "knowledge_base_document" using gin ("search_vector");`);
  }

  override async down(): Promise<void> {
    this.addSql(`drop table if exists "knowledge_base_document_version" cascade;`);

    this.addSql(`drop table if exists "knowledge_base_chunk" cascade;`);

    this.addSql(`drop table if exists "knowledge_base_section" cascade;`);

    this.addSql(`drop table if exists "knowledge_base_index_state" cascade;`);

    this.addSql(`drop table if exists "knowledge_base_ingestion" cascade;`);

    this.addSql(`drop table if exists "knowledge_base_document" cascade;`);
  }
}
