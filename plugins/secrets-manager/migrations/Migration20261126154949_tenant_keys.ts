import { Migration } from 'rpc-service/plugin';

export class Migration20261126154949_tenant_keys extends Migration {
  override async up(): Promise<void> {
    this.addSql(`alter table "secrets_manager_secret" drop constraint "secrets_manager_secret_pkey";`);

    this.addSql(`alter table "secrets_manager_secret" add constraint "secrets_manager_secret_pkey" primary key ("subscription_id", "id");`);
  }

  override async down(): Promise<void> {
    this.addSql(`alter table "secrets_manager_secret" drop constraint "secrets_manager_secret_pkey";`);

    this.addSql(`alter table "secrets_manager_secret" add constraint "secrets_manager_secret_pkey" primary key ("id");`);
  }
}
