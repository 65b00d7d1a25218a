import { Migration } from 'rpc-service/plugin';

export class Migration20261207125813_source_stats extends Migration {
  override async up(): Promise<void> {
    this.addSql(
      `create table "knowledge_base_source_stat" ("subscription_id" uuid not null, "source" text not null, "chunks" int not null, "mean_length" double precision not null, "counted_at" timestamptz not null, constraint "knowledge_base_source_stat_pkey" primary key ("subscription_id", "source"));`,
    );
  }

  override async down(): Promise<void> {
    this.addSql(`drop table if exists "knowledge_base_source_stat" cascade;`);
  }
}
