import { Migration } from 'rpc-service/plugin';

export class Migration20261123220409_initial extends Migration {
  override async up(): Promise<void> {
    this.addSql(
      `create table "secrets_manager_secret" ("id" uuid not null, "subscription_id" uuid not null, "scope" text check ("scope" in ('subscription', 'project', 'agent')) not null, "project_id" text null, "agent_name" text null, "key" text not null, "label" text null, "description" text null, "value" text not null, "created_at" timestamptz not null, "updated_at" timestamptz not null, constraint "secrets_manager_secret_pkey" primary key ("id"));`,
    );
    this.addSql(
      `create unique index "secrets_manager_secret_place_unique" on "secrets_manager_secret" ("subscription_id", "scope", coalesce("project_id", ''), coalesce("agent_name", ''), "key");`,
    );
  }

  override async down(): Promise<void> {
    this.addSql(`drop table if exists "secrets_manager_secret" cascade;`);
  }
}
