import { Migration } from 'rpc-service/plugin';

export class Migration20261126154954_tenant_keys extends Migration {
  override async up(): Promise<void> {
    this.addSql(`alter table "telephony_assignment" drop constraint "telephony_assignment_pkey";`);

    this.addSql(`alter table "telephony_assignment" add constraint "telephony_assignment_pkey" primary key ("subscription_id", "id");`);
  }

  override async down(): Promise<void> {
    this.addSql(`alter table "telephony_assignment" drop constraint "telephony_assignment_pkey";`);

    this.addSql(`alter table "telephony_assignment" add constraint "telephony_assignment_pkey" primary key ("id");`);
  }
}
