import { Migration } from 'rpc-service/plugin';

export class Migration20261126154917_tenant_keys extends Migration {
  override async up(): Promise<void> {
    this.addSql(`alter table "api_key" drop constraint "api_key_pkey";`);

    this.addSql(`alter table "api_key" add constraint "api_key_pkey" primary key ("subscription_id", "id");`);
  }

  override async down(): Promise<void> {
    this.addSql(`alter table "api_key" drop constraint "api_key_pkey";`);

    this.addSql(`alter table "api_key" add constraint "api_key_pkey" primary key ("id");`);
  }
}
