import { Migration } from 'rpc-service/plugin';

export class Migration20261126154927_tenant_keys extends Migration {
  override async up(): Promise<void> {
    this.addSql(`alter table "discount" drop constraint "discount_pkey";`);

    this.addSql(`alter table "discount" add constraint "discount_pkey" primary key ("subscription_id", "id");`);
  }

  override async down(): Promise<void> {
    this.addSql(`alter table "discount" drop constraint "discount_pkey";`);

    this.addSql(`alter table "discount" add constraint "discount_pkey" primary key ("id");`);
  }
}
