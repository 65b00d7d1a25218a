import { Migration } from 'rpc-service/plugin';

export class Migration20261124183054_initial extends Migration {
  override async up(): Promise<void> {
    this.addSql(
      `create table "discount" ("id" uuid not null, "subscription_id" uuid not null, "code" text not null, "name" text not null, "description" text not null, "kind" text not null, "value" bigint not null, "currency" text null, "valid_from" timestamptz null, "valid_until" timestamptz null, "max_redemptions" int null, "current_redemptions" int not null, "plan_ids" text[] not null, "is_active" boolean not null, "created_at" timestamptz not null, "updated_at" timestamptz not null, constraint "discount_pkey" primary key ("id"));`,
    );
    this.addSql(`create index "discount_subscription_id_is_active_created_at_index" on "discount" ("subscription_id", "is_active", "created_at");`);
    this.addSql(`create unique index "discount_code_unique" on "discount" ("subscription_id", upper("code"));`);
  }

  override async down(): Promise<void> {
    this.addSql(`drop table if exists "discount" cascade;`);
  }
}
