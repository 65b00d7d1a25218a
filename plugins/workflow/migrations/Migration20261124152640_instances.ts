import { Migration } from 'rpc-service/plugin';

export class Migration20261124152640_instances extends Migration {
  override async up(): Promise<void> {
    this.addSql(
      `create table "workflow_pending_event" ("id" uuid not null, "subscription_id" uuid not null, "instance_id" uuid not null, "event_name" text not null, "event_data" jsonb not null, "created_at" timestamptz not null, constraint "workflow_pending_event_pkey" primary key ("id"));`,
    );
    this.addSql(
      `create index "workflow_pending_event_instance_id_event_name_created_at_index" on "workflow_pending_event" ("instance_id", "event_name", "created_at");`,
    );

    this.addSql(
      `create table "workflow_instance" ("id" uuid not null, "subscription_id" uuid not null, "workflow_id" uuid not null, "workflow_name" text not null, "user_id" uuid not null, "project_id" text null, "status" text check ("status" in ('running', 'waiting', 'completed', 'failed', 'cancelled')) not null, "graph" jsonb not null, "cursor" text not null, "variables" jsonb not null, "args" jsonb not null, "steps" int not null, "history" jsonb not null, "waiting_for" text null, "wake_at" timestamptz null, "output" jsonb null, "error" text null, "lease_until" timestamptz null, "created_at" timestamptz not null, "updated_at" timestamptz not null, "finished_at" timestamptz null, constraint "workflow_instance_pkey" primary key ("id"));`,
    );
    this.addSql(
      `create index "workflow_instance_subscription_id_workflow_id_stat_fe411_index" on "workflow_instance" ("subscription_id", "workflow_id", "status", "created_at");`,
    );
    this.addSql(`create index "workflow_instance_subscription_id_created_at_index" on "workflow_instance" ("subscription_id", "created_at");`);
    this.addSql(`create index "workflow_instance_running_index" on "workflow_instance" ("lease_until") where "status" = 'running';`);
  }

  override async down(): Promise<void> {
    this.addSql(`drop table if exists "workflow_pending_event" cascade;`);

    this.addSql(`drop table if exists "workflow_instance" cascade;`);
  }
}
