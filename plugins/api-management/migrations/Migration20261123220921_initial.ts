import { Migration } from 'rpc-service/plugin';

export class Migration20261123220921_initial extends Migration {
  override async up(): Promise<void> {
    this.addSql(
      `create table "api_management_endpoint_lease" ("api_key_id" uuid not null, "holder" uuid not null, "until" timestamptz not null, constraint "api_management_endpoint_lease_pkey" primary key ("api_key_id"));`,
    );

    this.addSql(
      `create table "api_management_delivery" ("id" uuid not null, "subscription_id" uuid not null, "api_key_id" uuid not null, "seq" bigserial, "event_id" uuid not null, "event_type" text not null, "body" text not null, "state" text check ("state" in ('pending', 'delivered', 'failed')) not null, "attempts" int not null default 0, "next_attempt_at" timestamptz not null, "last_attempt_at" timestamptz null, "last_status_code" int null, "last_error" text null, "attempt_log" jsonb not null, "delivered_at" timestamptz null, "created_at" timestamptz not null, constraint "api_management_delivery_pkey" primary key ("id"));`,
    );
    this.addSql(`create index "api_management_delivery_api_key_id_state_seq_index" on "api_management_delivery" ("api_key_id", "state", "seq");`);
    this.addSql(
      `create index "api_management_delivery_subscription_id_state_created_at_index" on "api_management_delivery" ("subscription_id", "state", "created_at");`,
    );
    this.addSql(`alter table "api_management_delivery" add constraint "api_management_delivery_event_id_api_key_id_unique" unique ("event_id", "api_key_id");`);
  }

  override async down(): Promise<void> {
    this.addSql(`drop table if exists "api_management_endpoint_lease" cascade;`);

    this.addSql(`drop table if exists "api_management_delivery" cascade;`);
  }
}
