import { Migration } from '../migration.ts';

export class Migration20261123224152_ai_trace extends Migration {
  override async up(): Promise<void> {
    this.addSql(
      `create table "core_ai_trace" ("trace_id" uuid not null, "subscription_id" uuid null, "user_id" uuid null, "thread_id" text null, "request_timestamp" timestamptz not null, "duration_ms" int not null, "status" text not null, "provider" text not null, "model" text not null, "operation" text not null, "caller_type" text not null, "caller_name" text not null, "input_tokens" int not null, "output_tokens" int not null, "cached_tokens" int not null, "total_tokens" int not null, "attempts" int not null, "error" text null, constraint "core_ai_trace_pkey" primary key ("trace_id"));`,
    );
    this.addSql(`create index "core_ai_trace_subscription_id_request_timestamp_index" on "core_ai_trace" ("subscription_id", "request_timestamp");`);
    this.addSql(`create index "core_ai_trace_subscription_id_thread_id_index" on "core_ai_trace" ("subscription_id", "thread_id");`);
  }

  override async down(): Promise<void> {
    this.addSql(`drop table if exists "core_ai_trace" cascade;`);
  }
}
