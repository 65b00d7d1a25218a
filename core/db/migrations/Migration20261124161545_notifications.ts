import { Migration } from '../migration.ts';

export class Migration20261124161545_notifications extends Migration {
  override async up(): Promise<void> {
    this.addSql(
      `create table "core_notification" ("id" uuid not null, "subscription_id" uuid not null, "user_id" uuid not null, "title" text not null, "message" text not null, "read" boolean not null, "timestamp" timestamptz not null, "source" text not null, "data" jsonb null, constraint "core_notification_pkey" primary key ("id"));`,
    );
    this.addSql(`create index "core_notification_subscription_id_user_id_timestamp_index" on "core_notification" ("subscription_id", "user_id", "timestamp");`);
  }

  override async down(): Promise<void> {
    this.addSql(`drop table if exists "core_notification" cascade;`);
  }
}
