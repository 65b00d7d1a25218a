import { Migration } from 'rpc-service/plugin';

export class Migration20261126154944_tenant_keys extends Migration {
  override async up(): Promise<void> {
    this.addSql(`alter table "scheduler_task" drop constraint "scheduler_task_pkey";`);

    this.addSql(`alter table "scheduler_task" add constraint "scheduler_task_pkey" primary key ("subscription_id", "id");`);

    this.addSql(`alter table "scheduler_run" drop constraint "scheduler_run_pkey";`);

    this.addSql(`alter table "scheduler_run" add constraint "scheduler_run_pkey" primary key ("subscription_id", "id");`);
  }

  override async down(): Promise<void> {
    this.addSql(`alter table "scheduler_task" drop constraint "scheduler_task_pkey";`);

    this.addSql(`alter table "scheduler_task" add constraint "scheduler_task_pkey" primary key ("id");`);

    this.addSql(`alter table "scheduler_run" drop constraint "scheduler_run_pkey";`);

    this.addSql(`alter table "scheduler_run" add constraint "scheduler_run_pkey" primary key ("id");`);
  }
}
