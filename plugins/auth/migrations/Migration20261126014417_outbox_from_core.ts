import { Migration } from 'rpc-service/plugin';

/** The constraints and indexes named after the table, by what follows its name. */
const NAMED_AFTER_IT = { constraints: ['pkey'], indexes: ['created_at_index'] };

/**
 * The outbox was the core's (`core_outbox`, made by the core's migrations,
 * which stay as they were): the table, its rows, its primary key and its
 * index are renamed to this plugin's names, not made anew.
 */
export class Migration20261126014417_outbox_from_core extends Migration {
  override async up(): Promise<void> {
    this.renameTable('core_outbox', 'auth_outbox', NAMED_AFTER_IT);
  }

  override async down(): Promise<void> {
    this.renameTable('auth_outbox', 'core_outbox', NAMED_AFTER_IT);
  }
}
