import { Migration } from 'rpc-service/plugin';

/**
 * The webhooks were columns of the api-key plugin's `api_key` until this
 * plugin took them over. The copy and the removal of those columns are both
 * here because plugins' migrations run owner by owner in load order
 * (core/db/orm.ts), and this plugin loads after api-key, whose keys it uses:
 * a migration of api-key dropping the columns would run before this copy on a
 * database that has neither, and lose the webhooks. Until this plugin is
 * loaded the columns stay on `api_key`, unread, with their data.
 */
export class Migration20261126013122_webhook_from_api_key extends Migration {
  override async up(): Promise<void> {
    this.addSql(
      `create table "api_management_webhook" ("api_key_id" uuid not null, "subscription_id" uuid not null, "url" text not null, "secret" text null, "status" text not null, "last_tested_at" timestamptz not null, constraint "api_management_webhook_pkey" primary key ("api_key_id"));`,
    );
    this.addSql(`create index "api_management_webhook_subscription_id_status_index" on "api_management_webhook" ("subscription_id", "status");`);
    this.addSql(`insert into "api_management_webhook" ("api_key_id", "subscription_id", "url", "secret", "status", "last_tested_at")
      select "id", "subscription_id", "webhook_url", "webhook_secret", coalesce("webhook_status", 'unreachable'), coalesce("last_tested_at", "updated_at")
      from "api_key" where "webhook_url" is not null;`);
    this.addSql(`alter table "api_key" drop column "webhook_url", drop column "webhook_secret", drop column "webhook_status", drop column "last_tested_at";`);
  }
}
