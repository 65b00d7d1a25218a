import { Migration } from 'rpc-service/plugin';

/**
 * The outbox was the core's (`core_outbox`, made by the core's migrations,
 * which stay as they were): the table, its rows, its primary key and its
 * index are renamed to this plugin's names, not made anew.
 */
export class Migration20261126014417_outbox_from_core extends Migration {

  override async up(): Promise<void> {
    this.addSql(`alter table "core_outbox" rename to "auth_outbox";`);
    this.addSql(`alter table "auth_outbox" rename constraint "core_outbox_pkey" to "auth_outbox_pkey";`);
    this.addSql(`alter index "core_outbox_created_at_index" rename to "auth_outbox_created_at_index";`);
  }

  override async down(): Promise<void> {
    this.addSql(`alter index "auth_outbox_created_at_index" rename to "core_outbox_created_at_index";`);
    this.addSql(`alter table "auth_outbox" rename constraint "auth_outbox_pkey" to "core_outbox_pkey";`);
    this.addSql(`alter table "auth_outbox" rename to "core_outbox";`);
  }

}
