import { Migration } from 'rpc-service/plugin';

export class Migration20261123220123_initial extends Migration {
  override async up(): Promise<void> {
    this.addSql(
      `create table "secrets_secret" ("id" uuid not null, "subscription_id" uuid not null, "zone" text not null, "key" text not null, "description" text not null, "value" text not null, "created_at" timestamptz not null, "updated_at" timestamptz not null, constraint "secrets_secret_pkey" primary key ("id"));`,
    );
    this.addSql(`alter table "secrets_secret" add constraint "secrets_secret_subscription_id_zone_key_unique" unique ("subscription_id", "zone", "key");`);
  }

  override async down(): Promise<void> {
    this.addSql(`drop table if exists "secrets_secret" cascade;`);
  }
}
