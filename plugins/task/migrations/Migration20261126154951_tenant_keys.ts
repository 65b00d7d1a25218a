import { Migration } from 'rpc-service/plugin';

export class Migration20261126154951_tenant_keys extends Migration {
  override async up(): Promise<void> {
    this.addSql(`alter table "task" drop constraint "task_pkey";`);

    this.addSql(`alter table "task" add constraint "task_pkey" primary key ("subscription_id", "id");`);
  }

  override async down(): Promise<void> {
    this.addSql(`alter table "task" drop constraint "task_pkey";`);

    this.addSql(`alter table "task" add constraint "task_pkey" primary key ("id");`);
  }
}
