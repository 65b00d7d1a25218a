import { Migration } from 'rpc-service/plugin';

/** The constraints and indexes named after the table, by what follows its name. */
const NAMED_AFTER_IT = {
  constraints: ['pkey', 'status_check', 'priority_check'],
  indexes: ['subscription_id_task_instance_id_created_at_index', 'subscription_id_parent_id_index'],
};

/** The table is named after the plugin alone (`task`, not `task_task`); its rows, constraints and indexes are kept and renamed with it. */
export class Migration20261126011346_rename_table extends Migration {
  override async up(): Promise<void> {
    this.renameTable('task_task', 'task', NAMED_AFTER_IT);
  }

  override async down(): Promise<void> {
    this.renameTable('task', 'task_task', NAMED_AFTER_IT);
  }
}
