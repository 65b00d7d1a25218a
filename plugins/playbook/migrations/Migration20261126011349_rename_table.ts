import { Migration } from 'rpc-service/plugin';

/** The constraints and indexes named after the table, by what follows its name. */
const NAMED_AFTER_IT = { constraints: ['pkey'], indexes: ['subscription_id_updated_at_index'] };

/** The table is named after the plugin alone (`playbook`, not `playbook_playbook`); its rows, constraints and indexes are kept and renamed with it. */
export class Migration20261126011349_rename_table extends Migration {
  override async up(): Promise<void> {
    this.renameTable('playbook_playbook', 'playbook', NAMED_AFTER_IT);
  }

  override async down(): Promise<void> {
    this.renameTable('playbook', 'playbook_playbook', NAMED_AFTER_IT);
  }
}
