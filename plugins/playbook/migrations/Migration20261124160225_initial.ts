import { Migration } from 'rpc-service/plugin';

export class Migration20261124160225_initial extends Migration {
  override async up(): Promise<void> {
    this.addSql(
      `create table "playbook_playbook" ("id" uuid not null, "subscription_id" uuid not null, "created_by" uuid not null, "source" text not null, "name" text not null, "description" text not null, "content" text not null, "category" text null, "tags" text[] not null, "is_active" boolean not null, "resources" jsonb not null, "created_at" timestamptz not null, "updated_at" timestamptz not null, constraint "playbook_playbook_pkey" primary key ("id"));`,
    );
    this.addSql(`create index "playbook_playbook_subscription_id_updated_at_index" on "playbook_playbook" ("subscription_id", "updated_at");`);
  }

  override async down(): Promise<void> {
    this.addSql(`drop table if exists "playbook_playbook" cascade;`);
  }
}
