import { Migration } from 'rpc-service/plugin';

export class Migration20261126154925_tenant_keys extends Migration {
  override async up(): Promise<void> {
    this.addSql(`alter table "billing_plan" drop constraint "billing_plan_pkey";`);

    this.addSql(`alter table "billing_plan" add constraint "billing_plan_pkey" primary key ("subscription_id", "id");`);
  }

  override async down(): Promise<void> {
    this.addSql(`alter table "billing_plan" drop constraint "billing_plan_pkey";`);

    this.addSql(`alter table "billing_plan" add constraint "billing_plan_pkey" primary key ("id");`);
  }
}
