import { Migration } from 'rpc-service/plugin';

export class Migration20261123171528_initial extends Migration {
  override async up(): Promise<void> {
    this.addSql(
      `create table "api_key" ("id" uuid not null, "subscription_id" uuid not null, "user_id" uuid not null, "prefix" text not null, "key_hash" text not null, "encrypted_key" text not null, "description" text not null, "is_enabled" boolean not null default true, "initial_context" jsonb null, "webhook_url" text null, "webhook_secret" text null, "webhook_status" text null, "last_tested_at" timestamptz null, "created_at" timestamptz not null, "updated_at" timestamptz not null, constraint "api_key_pkey" primary key ("id"));`,
    );
    this.addSql(`alter table "api_key" add constraint "api_key_prefix_unique" unique ("prefix");`);
    this.addSql(`create index "api_key_subscription_id_user_id_index" on "api_key" ("subscription_id", "user_id");`);
  }

  override async down(): Promise<void> {
    this.addSql(`drop table if exists "api_key" cascade;`);
  }
}
