import { Migration } from '../migration.ts';

export class Migration20261123171538_initial extends Migration {
  override async up(): Promise<void> {
    // Written by hand: the generator does not create extensions. Vector columns of any plugin need it.
    this.addSql(`create extension if not exists vector;`);

    this.addSql(`create table "core_event_payload" ("id" bigserial primary key, "body" jsonb not null, "created_at" timestamptz not null default now());`);

    this.addSql(
      `create table "core_outbox" ("id" uuid not null, "channel" text not null, "recipient" text not null, "subject" text not null, "body" text not null, "created_at" timestamptz not null, constraint "core_outbox_pkey" primary key ("id"));`,
    );
    this.addSql(`create index "core_outbox_created_at_index" on "core_outbox" ("created_at");`);

    this.addSql(
      `create table "core_rate_limit" ("bucket" text not null, "hits" int not null, "window_ends_at" timestamptz not null, constraint "core_rate_limit_pkey" primary key ("bucket"));`,
    );

    this.addSql(
      `create table "core_file" ("id" uuid not null, "subscription_id" uuid not null, "user_id" uuid null, "upload_key_id" uuid null, "purpose" text not null, "file_name" text not null, "mime_type" text not null, "size" bigint not null, "sha256" text not null, "storage_path" text not null, "finalized_at" timestamptz null, "created_at" timestamptz not null, constraint "core_file_pkey" primary key ("id"));`,
    );
    this.addSql(`create index "core_file_subscription_id_index" on "core_file" ("subscription_id");`);
    this.addSql(`create index "core_file_upload_key_id_index" on "core_file" ("upload_key_id");`);
    this.addSql(`create index "core_file_unfinalized_index" on "core_file" ("created_at") where "finalized_at" is null;`);

    this.addSql(
      `create table "core_upload_key" ("id" uuid not null, "subscription_id" uuid not null, "user_id" uuid not null, "key_hash" text not null, "purpose" text not null, "expires_at" timestamptz not null, "used_at" timestamptz null, "created_at" timestamptz not null, constraint "core_upload_key_pkey" primary key ("id"));`,
    );
    this.addSql(`alter table "core_upload_key" add constraint "core_upload_key_key_hash_unique" unique ("key_hash");`);
    this.addSql(`create index "core_upload_key_expires_at_index" on "core_upload_key" ("expires_at");`);
  }

  override async down(): Promise<void> {
    this.addSql(`drop table if exists "core_event_payload" cascade;`);

    this.addSql(`drop table if exists "core_outbox" cascade;`);

    this.addSql(`drop table if exists "core_rate_limit" cascade;`);

    this.addSql(`drop table if exists "core_file" cascade;`);

    this.addSql(`drop table if exists "core_upload_key" cascade;`);
  }
}
