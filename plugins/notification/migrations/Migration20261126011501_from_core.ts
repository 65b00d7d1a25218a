import { Migration } from 'rpc-service/plugin';

/**
 * Notifications were the core's (`core_notification`, made by the core's
 * migrations, which stay as they were): the table, its rows and its index
 * and constraints are renamed to this plugin's names, not made anew.
 */
export class Migration20261126011501_from_core extends Migration {

  override async up(): Promise<void> {
    this.addSql(`alter table "core_notification" rename to "notification";`);
    this.addSql(`alter table "notification" rename constraint "core_notification_pkey" to "notification_pkey";`);
    this.addSql(`alter index "core_notification_subscription_id_user_id_timestamp_index" rename to "notification_subscription_id_user_id_timestamp_index";`);
    this.addSql(`alter table "notification" rename constraint "core_notification_user_id_dedupe_key_unique" to "notification_user_id_dedupe_key_unique";`);
  }

  override async down(): Promise<void> {
    this.addSql(`alter table "notification" rename constraint "notification_user_id_dedupe_key_unique" to "core_notification_user_id_dedupe_key_unique";`);
    this.addSql(`alter index "notification_subscription_id_user_id_timestamp_index" rename to "core_notification_subscription_id_user_id_timestamp_index";`);
    this.addSql(`alter table "notification" rename constraint "notification_pkey" to "core_notification_pkey";`);
    this.addSql(`alter table "notification" rename to "core_notification";`);
  }

}
