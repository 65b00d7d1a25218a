import { Migration } from 'rpc-service/plugin';

export class Migration20261124144212_shared_embedding_state extends Migration {
  override async up(): Promise<void> {
    // The state moves to the core's table, which keeps it for every table of embeddings (the core's migrations run first).
    this.addSql(
      `insert into "core_embedding_state" ("table_name", "active_slot", "active_model", "next_model", "inactive_dirty", "lease_until", "switch_started_at", "switched_at") select 'knowledge_base_chunk', "active_slot", "active_model", "next_model", "inactive_dirty", null, "switch_started_at", "switched_at" from "knowledge_base_index_state" where "id" = 1 on conflict do nothing;`,
    );
    this.addSql(`drop table if exists "knowledge_base_index_state" cascade;`);
  }

  override async down(): Promise<void> {
    this.addSql(
      `create table "knowledge_base_index_state" ("id" int not null, "active_slot" text not null, "active_model" text not null, "next_model" text null, "inactive_dirty" boolean not null default false, "lease_until" timestamptz null, "switch_started_at" timestamptz null, "switched_at" timestamptz null, constraint "knowledge_base_index_state_pkey" primary key ("id"));`,
    );
    this.addSql(
      `insert into "knowledge_base_index_state" ("id", "active_slot", "active_model", "next_model", "inactive_dirty", "switch_started_at", "switched_at") select 1, "active_slot", "active_model", "next_model", "inactive_dirty", "switch_started_at", "switched_at" from "core_embedding_state" where "table_name" = 'knowledge_base_chunk';`,
    );
    this.addSql(`delete from "core_embedding_state" where "table_name" = 'knowledge_base_chunk';`);
  }
}
