import { Migration } from 'rpc-service/plugin';

export class Migration20261128231158_leases extends Migration {
  override async up(): Promise<void> {
    this.addSql(
      `alter table "process_executor_instance" add column "host" text null, add column "pid" int null, add column "pid_started_at" text null, add column "lease_until" timestamptz null;`,
    );
    this.addSql(`create index "process_executor_instance_running_index" on "process_executor_instance" ("lease_until") where "status" = 'running';`);
  }

  override async down(): Promise<void> {
    this.addSql(`drop index "process_executor_instance_running_index";`);
    this.addSql(`alter table "process_executor_instance" drop column "host", drop column "pid", drop column "pid_started_at", drop column "lease_until";`);
  }
}
