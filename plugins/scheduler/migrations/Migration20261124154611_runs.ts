import { Migration } from 'rpc-service/plugin';

export class Migration20261124154611_runs extends Migration {
  override async up(): Promise<void> {
    this.addSql(
      `create table "scheduler_run" ("id" uuid not null, "subscription_id" uuid not null, "task_id" uuid not null, "task_name" text not null, "action_type" text check ("action_type" in ('event', 'rpc', 'workflow', 'aiMessage')) not null, "scheduled_for" timestamptz not null, "fired_at" timestamptz not null, "finished_at" timestamptz null, "status" text check ("status" in ('running', 'succeeded', 'failed')) not null, "error" text null, "result" jsonb null, "attempts" int not null, constraint "scheduler_run_pkey" primary key ("id"));`,
    );
    this.addSql(`create index "scheduler_run_subscription_id_task_id_fired_at_index" on "scheduler_run" ("subscription_id", "task_id", "fired_at");`);
    this.addSql(`create index "scheduler_run_subscription_id_fired_at_index" on "scheduler_run" ("subscription_id", "fired_at");`);
    this.addSql(`create index "scheduler_run_running_index" on "scheduler_run" ("fired_at") where "status" = 'running';`);
  }

  override async down(): Promise<void> {
    this.addSql(`drop table if exists "scheduler_run" cascade;`);
  }
}
