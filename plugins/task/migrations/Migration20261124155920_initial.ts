import { Migration } from 'rpc-service/plugin';

export class Migration20261124155920_initial extends Migration {
  override async up(): Promise<void> {
    this.addSql(
      `create table "task_task" ("id" uuid not null, "subscription_id" uuid not null, "task_instance_id" text not null, "title" text not null, "description" text null, "status" text check ("status" in ('todo', 'in_progress', 'in_review', 'done', 'blocked')) not null, "priority" text check ("priority" in ('low', 'medium', 'high', 'urgent')) not null, "assignees" text[] not null, "parent_id" uuid null, "due_date" timestamptz null, "completed_at" timestamptz null, "tags" text[] not null, "comments" jsonb not null, "is_archived" boolean not null, "created_by" uuid not null, "created_at" timestamptz not null, "updated_at" timestamptz not null, constraint "task_task_pkey" primary key ("id"));`,
    );
    this.addSql(
      `create index "task_task_subscription_id_task_instance_id_created_at_index" on "task_task" ("subscription_id", "task_instance_id", "created_at");`,
    );
    this.addSql(`create index "task_task_subscription_id_parent_id_index" on "task_task" ("subscription_id", "parent_id");`);
  }

  override async down(): Promise<void> {
    this.addSql(`drop table if exists "task_task" cascade;`);
  }
}
