import { Migration } from 'rpc-service/plugin';

export class Migration20261126154939_tenant_keys extends Migration {
  override async up(): Promise<void> {
    this.addSql(`alter table "process_executor_instance" drop constraint "process_executor_instance_pkey";`);

    this.addSql(`alter table "process_executor_instance" add constraint "process_executor_instance_pkey" primary key ("subscription_id", "id");`);
  }

  override async down(): Promise<void> {
    this.addSql(`alter table "process_executor_instance" drop constraint "process_executor_instance_pkey";`);

    this.addSql(`alter table "process_executor_instance" add constraint "process_executor_instance_pkey" primary key ("id");`);
  }
}
