import { Migration } from '../migration.ts';

export class Migration20261123215714_keyring_and_audit extends Migration {
  override async up(): Promise<void> {
    this.addSql(
      `create table "core_audit_log" ("id" uuid not null, "subscription_id" uuid not null, "at" timestamptz not null, "kind" text not null, "group" text not null, "action" text not null, "target_id" text not null, "target" text not null, "user_id" uuid null, "role" text null, "api_key_id" uuid null, "session_id" uuid null, "request_id" text not null, constraint "core_audit_log_pkey" primary key ("id"));`,
    );
    this.addSql(`create index "core_audit_log_subscription_id_kind_at_index" on "core_audit_log" ("subscription_id", "kind", "at");`);

    this.addSql(
      `create table "core_data_key" ("id" uuid not null, "subscription_id" uuid not null, "wraps" jsonb not null, "created_at" timestamptz not null, "rewrapped_at" timestamptz null, constraint "core_data_key_pkey" primary key ("id"));`,
    );
    this.addSql(`alter table "core_data_key" add constraint "core_data_key_subscription_id_unique" unique ("subscription_id");`);
  }

  override async down(): Promise<void> {
    this.addSql(`drop table if exists "core_audit_log" cascade;`);

    this.addSql(`drop table if exists "core_data_key" cascade;`);
  }
}
