import { Migration } from 'rpc-service/plugin';

export class Migration20261126154937_tenant_keys extends Migration {
  override async up(): Promise<void> {
    this.addSql(`alter table "playbook" drop constraint "playbook_pkey";`);

    this.addSql(`alter table "playbook" add constraint "playbook_pkey" primary key ("subscription_id", "id");`);
  }

  override async down(): Promise<void> {
    this.addSql(`alter table "playbook" drop constraint "playbook_pkey";`);

    this.addSql(`alter table "playbook" add constraint "playbook_pkey" primary key ("id");`);
  }
}
