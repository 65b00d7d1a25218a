import { Migration } from 'rpc-service/plugin';

/**
 * The traces were the core's table until the core's AI client began to report
 * its calls through `core.aiCalls`; the core's migration that made it
 * (core/db/migrations/Migration20261123224152_ai_trace.ts) always runs before
 * any plugin's, so the table, its rows and its indexes are renamed in place.
 */
export class Migration20261126011446_trace_from_core extends Migration {

  override async up(): Promise<void> {
    this.addSql(`alter table "core_ai_trace" rename to "ai_telemetry_trace";`);
    this.addSql(`alter table "ai_telemetry_trace" rename constraint "core_ai_trace_pkey" to "ai_telemetry_trace_pkey";`);
    this.addSql(`alter index "core_ai_trace_subscription_id_request_timestamp_index" rename to "ai_telemetry_trace_subscription_id_request_timestamp_index";`);
    this.addSql(`alter index "core_ai_trace_subscription_id_thread_id_index" rename to "ai_telemetry_trace_subscription_id_thread_id_index";`);
  }

  override async down(): Promise<void> {
    this.addSql(`alter index "ai_telemetry_trace_subscription_id_thread_id_index" rename to "core_ai_trace_subscription_id_thread_id_index";`);
    this.addSql(`alter index "ai_telemetry_trace_subscription_id_request_timestamp_index" rename to "core_ai_trace_subscription_id_request_timestamp_index";`);
    this.addSql(`alter table "ai_telemetry_trace" rename constraint "ai_telemetry_trace_pkey" to "core_ai_trace_pkey";`);
    this.addSql(`alter table "ai_telemetry_trace" rename to "core_ai_trace";`);
  }

}
