import { Migration } from 'rpc-service/plugin';

export class Migration20261124160443_initial extends Migration {
  override async up(): Promise<void> {
    this.addSql(
      `create table "process_executor_instance" ("id" uuid not null, "subscription_id" uuid not null, "started_by" uuid not null, "node_id" text not null, "command" text not null, "args" text[] not null, "status" text check ("status" in ('running', 'exited', 'failed', 'stopped')) not null, "exit_code" int null, "signal" text null, "error" text null, "logs" jsonb not null, "started_at" timestamptz not null, "ended_at" timestamptz null, constraint "process_executor_instance_pkey" primary key ("id"));`,
    );
    this.addSql(`create index "process_executor_instance_subscription_id_status_index" on "process_executor_instance" ("subscription_id", "status");`);
  }

  override async down(): Promise<void> {
    this.addSql(`drop table if exists "process_executor_instance" cascade;`);
  }
}
