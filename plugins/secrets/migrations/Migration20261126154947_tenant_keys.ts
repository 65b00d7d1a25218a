import { Migration } from 'rpc-service/plugin';

export class Migration20261126154947_tenant_keys extends Migration {
  override async up(): Promise<void> {
    this.addSql(`alter table "secrets" drop constraint "secrets_pkey";`);

    this.addSql(`alter table "secrets" add constraint "secrets_pkey" primary key ("subscription_id", "id");`);
  }

  override async down(): Promise<void> {
    this.addSql(`alter table "secrets" drop constraint "secrets_pkey";`);

    this.addSql(`alter table "secrets" add constraint "secrets_pkey" primary key ("id");`);
  }
}
