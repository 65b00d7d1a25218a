import { Migration } from 'rpc-service/plugin';

/** The constraints and indexes named after the table, by what follows its name. */
const NAMED_AFTER_IT = { constraints: ['pkey', 'user_id_dedupe_key_unique'], indexes: ['subscription_id_user_id_timestamp_index'] };

/**
 * Notifications were the core's (`core_notification`, made by the core's
 * migrations, which stay as they were): the table, its rows and its index
 * and constraints are renamed to this plugin's names, not made anew.
 */
export class Migration20261126011501_from_core extends Migration {
  override async up(): Promise<void> {
    this.renameTable('core_notification', 'notification', NAMED_AFTER_IT);
  }

  override async down(): Promise<void> {
    this.renameTable('notification', 'core_notification', NAMED_AFTER_IT);
  }
}
