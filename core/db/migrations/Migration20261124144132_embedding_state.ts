import { Migration } from '../migration.ts';

export class Migration20261124144132_embedding_state extends Migration {
  override async up(): Promise<void> {
    this.addSql(
      `create table "core_embedding_state" ("table_name" text not null, "active_slot" text not null, "active_model" text not null, "next_model" text null, "inactive_dirty" boolean not null default false, "lease_until" timestamptz null, "switch_started_at" timestamptz null, "switched_at" timestamptz null, constraint "core_embedding_state_pkey" primary key ("table_name"));`,
    );
  }

  override async down(): Promise<void> {
    this.addSql(`drop table if exists "core_embedding_state" cascade;`);
  }
}
