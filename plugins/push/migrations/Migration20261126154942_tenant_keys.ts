import { Migration } from 'rpc-service/plugin';

export class Migration20261126154942_tenant_keys extends Migration {
  override async up(): Promise<void> {
    this.addSql(`alter table "push_subscription" drop constraint "push_subscription_pkey";`);

    this.addSql(`alter table "push_subscription" add constraint "push_subscription_pkey" primary key ("subscription_id", "id");`);
  }

  override async down(): Promise<void> {
    this.addSql(`alter table "push_subscription" drop constraint "push_subscription_pkey";`);

    this.addSql(`alter table "push_subscription" add constraint "push_subscription_pkey" primary key ("id");`);
  }
}
