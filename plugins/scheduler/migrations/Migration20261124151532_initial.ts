import { Migration } from 'rpc-service/plugin';

export class Migration20261124151532_initial extends Migration {
  override async up(): Promise<void> {
    this.addSql(
      `create table "scheduler_task" ("id" uuid not null, "subscription_id" uuid not null, "user_id" uuid not null, "created_by" uuid not null, "name" text not null, "description" text null, "schedule" text not null, "time_zone" text null, "action_type" text check ("action_type" in ('event', 'rpc', 'workflow', 'aiMessage')) not null, "action_config" jsonb not null, "context" jsonb not null, "category" text check ("category" in ('system', 'user', 'campaign', 'automation')) not null, "tags" text[] not null, "enabled" boolean not null, "next_run" timestamptz null, "last_run" timestamptz null, "created_at" timestamptz not null, "updated_at" timestamptz not null, constraint "scheduler_task_pkey" primary key ("id"));`,
    );
    this.addSql(`create index "scheduler_task_subscription_id_created_at_index" on "scheduler_task" ("subscription_id", "created_at");`);
    this.addSql(`create index "scheduler_task_due_index" on "scheduler_task" ("next_run") where "enabled" and "next_run" is not null;`);
  }

  override async down(): Promise<void> {
    this.addSql(`drop table if exists "scheduler_task" cascade;`);
  }
}
