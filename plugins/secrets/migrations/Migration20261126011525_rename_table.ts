import { Migration } from 'rpc-service/plugin';

/** The table is named after the plugin alone (`secrets`, not `secrets_secret`); its rows, constraints and indexes are kept and renamed with it. */
export class Migration20261126011525_rename_table extends Migration {

  override async up(): Promise<void> {
    this.addSql(`alter table "secrets_secret" rename to "secrets";`);
    this.addSql(`alter table "secrets" rename constraint "secrets_secret_pkey" to "secrets_pkey";`);
    this.addSql(`alter table "secrets" rename constraint "secrets_secret_subscription_id_zone_key_unique" to "secrets_subscription_id_zone_key_unique";`);
  }

  override async down(): Promise<void> {
    this.addSql(`alter table "secrets" rename constraint "secrets_subscription_id_zone_key_unique" to "secrets_secret_subscription_id_zone_key_unique";`);
    this.addSql(`alter table "secrets" rename constraint "secrets_pkey" to "secrets_secret_pkey";`);
    this.addSql(`alter table "secrets" rename to "secrets_secret";`);
  }

}
