import { Migration } from 'rpc-service/plugin';

export class Migration20261126100232_trace_cost extends Migration {
  override async up(): Promise<void> {
    this.addSql(`alter table "ai_telemetry_trace" add column "cost_usd" double precision null;`);
  }

  override async down(): Promise<void> {
    this.addSql(`alter table "ai_telemetry_trace" drop column "cost_usd";`);
  }
}
