import { Migration } from 'rpc-service/plugin';

/** The table is named after the plugin alone (`task`, not `task_task`); its rows, constraints and indexes are kept and renamed with it. */
export class Migration20261126011346_rename_table extends Migration {

  override async up(): Promise<void> {
    this.addSql(`alter table "task_task" rename to "task";`);
    this.addSql(`alter table "task" rename constraint "task_task_pkey" to "task_pkey";`);
    this.addSql(`alter table "task" rename constraint "task_task_status_check" to "task_status_check";`);
    this.addSql(`alter table "task" rename constraint "task_task_priority_check" to "task_priority_check";`);
    this.addSql(`alter index "task_task_subscription_id_task_instance_id_created_at_index" rename to "task_subscription_id_task_instance_id_created_at_index";`);
    this.addSql(`alter index "task_task_subscription_id_parent_id_index" rename to "task_subscription_id_parent_id_index";`);
  }

  override async down(): Promise<void> {
    this.addSql(`alter index "task_subscription_id_parent_id_index" rename to "task_task_subscription_id_parent_id_index";`);
    this.addSql(`alter index "task_subscription_id_task_instance_id_created_at_index" rename to "task_task_subscription_id_task_instance_id_created_at_index";`);
    this.addSql(`alter table "task" rename constraint "task_priority_check" to "task_task_priority_check";`);
    this.addSql(`alter table "task" rename constraint "task_status_check" to "task_task_status_check";`);
    this.addSql(`alter table "task" rename constraint "task_pkey" to "task_task_pkey";`);
    this.addSql(`alter table "task" rename to "task_task";`);
  }

}
