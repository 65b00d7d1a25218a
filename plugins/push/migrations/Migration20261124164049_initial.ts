import { Migration } from 'rpc-service/plugin';

export class Migration20261124164049_initial extends Migration {
  override async up(): Promise<void> {
    this.addSql(
      `create table "push_subscription" ("id" uuid not null, "subscription_id" uuid not null, "user_id" uuid not null, "endpoint" text not null, "p256dh" text not null, "auth" text not null, "channels" text[] not null, "created_at" timestamptz not null, "updated_at" timestamptz not null, constraint "push_subscription_pkey" primary key ("id"));`,
    );
    this.addSql(`alter table "push_subscription" add constraint "push_subscription_endpoint_unique" unique ("endpoint");`);
    this.addSql(`create index "push_subscription_subscription_id_user_id_index" on "push_subscription" ("subscription_id", "user_id");`);

    this.addSql(
      `create table "push_vapid_keys" ("id" int not null, "public_key" text not null, "private_key_sealed" text not null, "created_at" timestamptz not null, constraint "push_vapid_keys_pkey" primary key ("id"));`,
    );
  }

  override async down(): Promise<void> {
    this.addSql(`drop table if exists "push_subscription" cascade;`);

    this.addSql(`drop table if exists "push_vapid_keys" cascade;`);
  }
}
