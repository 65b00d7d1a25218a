import { Migration } from 'rpc-service/plugin';

/** Traces are keyed by subscription; those of calls made for no subscription were no tenant's to read, and go. */
export class Migration20261126154914_tenant_keys extends Migration {
  override async up(): Promise<void> {
    this.addSql(`alter table "ai_telemetry_trace" drop constraint "ai_telemetry_trace_pkey";`);
    this.addSql(`delete from "ai_telemetry_trace" where "subscription_id" is null;`);

    this.addSql(`alter table "ai_telemetry_trace" alter column "subscription_id" set not null;`);
    this.addSql(`alter table "ai_telemetry_trace" add constraint "ai_telemetry_trace_pkey" primary key ("subscription_id", "trace_id");`);
  }

  override async down(): Promise<void> {
    this.addSql(`alter table "ai_telemetry_trace" drop constraint "ai_telemetry_trace_pkey";`);

    this.addSql(`alter table "ai_telemetry_trace" alter column "subscription_id" drop not null;`);
    this.addSql(`alter table "ai_telemetry_trace" add constraint "ai_telemetry_trace_pkey" primary key ("trace_id");`);
  }
}
