import { Migration } from 'rpc-service/plugin';

/** The table is named after the plugin alone (`playbook`, not `playbook_playbook`); its rows, constraints and indexes are kept and renamed with it. */
export class Migration20261126011349_rename_table extends Migration {

  override async up(): Promise<void> {
    this.addSql(`alter table "playbook_playbook" rename to "playbook";`);
    this.addSql(`alter table "playbook" rename constraint "playbook_playbook_pkey" to "playbook_pkey";`);
    this.addSql(`alter index "playbook_playbook_subscription_id_updated_at_index" rename to "playbook_subscription_id_updated_at_index";`);
  }

  override async down(): Promise<void> {
    this.addSql(`alter index "playbook_subscription_id_updated_at_index" rename to "playbook_playbook_subscription_id_updated_at_index";`);
    this.addSql(`alter table "playbook" rename constraint "playbook_pkey" to "playbook_playbook_pkey";`);
    this.addSql(`alter table "playbook" rename to "playbook_playbook";`);
  }

}
