import { Migration } from 'rpc-service/plugin';

export class Migration20261124183913_initial extends Migration {
  override async up(): Promise<void> {
    this.addSql(
      `create table "telephony_assignment" ("id" uuid not null, "subscription_id" uuid not null, "extension" text not null, "kind" text check ("kind" in ('user', 'agent')) not null, "user_id" uuid null, "agent_config_id" text null, "agent_contact_id" text null, "assigned_by" uuid not null, "created_at" timestamptz not null, constraint "telephony_assignment_pkey" primary key ("id"));`,
    );
    this.addSql(`create index "telephony_assignment_subscription_id_user_id_index" on "telephony_assignment" ("subscription_id", "user_id");`);
    this.addSql(`create index "telephony_assignment_subscription_id_agent_config_id_index" on "telephony_assignment" ("subscription_id", "agent_config_id");`);
    this.addSql(
      `create index "telephony_assignment_subscription_id_agent_contact_id_index" on "telephony_assignment" ("subscription_id", "agent_contact_id");`,
    );
    this.addSql(
      `alter table "telephony_assignment" add constraint "telephony_assignment_subscription_id_extension_unique" unique ("subscription_id", "extension");`,
    );
  }

  override async down(): Promise<void> {
    this.addSql(`drop table if exists "telephony_assignment" cascade;`);
  }
}
