import { Migration } from 'rpc-service/plugin';

/** The constraints and indexes named after the table, by what follows its name. */
const NAMED_AFTER_IT = { constraints: ['pkey', 'subscription_id_zone_key_unique'] };

/** The table is named after the plugin alone (`secrets`, not `secrets_secret`); its rows, constraints and indexes are kept and renamed with it. */
export class Migration20261126011525_rename_table extends Migration {
  override async up(): Promise<void> {
    this.renameTable('secrets_secret', 'secrets', NAMED_AFTER_IT);
  }

  override async down(): Promise<void> {
    this.renameTable('secrets', 'secrets_secret', NAMED_AFTER_IT);
  }
}
