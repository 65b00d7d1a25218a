import { Migration } from 'rpc-service/plugin';

export class Migration20261125222816_run_attempts extends Migration {
  override async up(): Promise<void> {
    this.addSql(`alter table "workflow_instance" add column "attempts" int not null default 0;`);
  }

  override async down(): Promise<void> {
    this.addSql(`alter table "workflow_instance" drop column "attempts";`);
  }
}
