import { Migration } from 'rpc-service/plugin';

/** The constraints and indexes named after the table, by what follows its name. */
const NAMED_AFTER_IT = { constraints: ['pkey'], indexes: ['subscription_id_request_timestamp_index', 'subscription_id_thread_id_index'] };

/**
 * The traces were the core's table until the core's AI client began to report
 * its calls through `core.aiCalls`; the core's migration that made it
 * (core/db/migrations/Migration20261123224152_ai_trace.ts) always runs before
 * any plugin's, so the table, its rows and its indexes are renamed in place.
 */
export class Migration20261126011446_trace_from_core extends Migration {
  override async up(): Promise<void> {
    this.renameTable('core_ai_trace', 'ai_telemetry_trace', NAMED_AFTER_IT);
  }

  override async down(): Promise<void> {
    this.renameTable('ai_telemetry_trace', 'core_ai_trace', NAMED_AFTER_IT);
  }
}
