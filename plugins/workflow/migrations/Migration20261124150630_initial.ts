import { Migration } from 'rpc-service/plugin';

export class Migration20261124150630_initial extends Migration {
  override async up(): Promise<void> {
    this.addSql(
      `create table "workflow_definition" ("id" uuid not null, "subscription_id" uuid not null, "user_id" uuid not null, "project_id" text null, "context_id" text null, "name" text not null, "description" text not null, "nodes" jsonb not null, "edges" jsonb not null, "variables" jsonb not null, "tags" text[] not null, "created_at" timestamptz not null, "updated_at" timestamptz not null, constraint "workflow_definition_pkey" primary key ("id"));`,
    );
    this.addSql(`create index "workflow_definition_subscription_id_updated_at_index" on "workflow_definition" ("subscription_id", "updated_at");`);
    this.addSql(`create unique index "workflow_definition_name_unique" on "workflow_definition" ("subscription_id", lower("name"));`);
  }

  override async down(): Promise<void> {
    this.addSql(`drop table if exists "workflow_definition" cascade;`);
  }
}
