import { Migration } from 'rpc-service/plugin';

export class Migration20261124182830_initial extends Migration {
  override async up(): Promise<void> {
    this.addSql(
      `create table "billing_plan" ("id" uuid not null, "subscription_id" uuid not null, "plan_id" text not null, "name" text not null, "description" text not null, "currency" text not null, "one_time_cost" bigint not null, "recurring_cost" bigint not null, "billing_cycle" text not null, "trial_days" int not null, "features" jsonb not null, "base_plan_id" text null, "is_public" boolean not null, "is_archived" boolean not null, "sort_order" int not null, "created_at" timestamptz not null, "updated_at" timestamptz not null, constraint "billing_plan_pkey" primary key ("id"));`,
    );
    this.addSql(
      `create index "billing_plan_subscription_id_is_public_is_archived_99871_index" on "billing_plan" ("subscription_id", "is_public", "is_archived", "sort_order");`,
    );
    this.addSql(`alter table "billing_plan" add constraint "billing_plan_subscription_id_plan_id_unique" unique ("subscription_id", "plan_id");`);
  }

  override async down(): Promise<void> {
    this.addSql(`drop table if exists "billing_plan" cascade;`);
  }
}
