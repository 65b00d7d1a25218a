import { Migration } from 'rpc-service/plugin';

export class Migration20261123225141_initial extends Migration {
  override async up(): Promise<void> {
    this.addSql(
      `create table "agent_config_agent" ("id" uuid not null, "subscription_id" uuid not null, "user_id" uuid not null, "project_id" text null, "name" text not null, "model" text not null, "agent_class" text not null, "role" text null, "realtime" boolean not null, "avatar_url" text null, "messaging_contact_id" text null, "settings" jsonb not null, "created_at" timestamptz not null, "updated_at" timestamptz not null, constraint "agent_config_agent_pkey" primary key ("id"));`,
    );
    this.addSql(`create index "agent_config_agent_subscription_id_project_id_index" on "agent_config_agent" ("subscription_id", "project_id");`);
    this.addSql(`alter table "agent_config_agent" add constraint "agent_config_agent_subscription_id_name_unique" unique ("subscription_id", "name");`);
  }

  override async down(): Promise<void> {
    this.addSql(`drop table if exists "agent_config_agent" cascade;`);
  }
}
