import { Migration } from '../migration.ts';

export class Migration20261126105015_blob_storage extends Migration {
  override async up(): Promise<void> {
    this.addSql(
      `create table "core_blob_chunk" ("subscription_id" uuid not null, "hash" text not null, "size" int not null, "refs" int not null, "data" bytea not null, constraint "core_blob_chunk_pkey" primary key ("subscription_id", "hash"));`,
    );

    this.addSql(
      `create table "core_blob_part" ("subscription_id" uuid not null, "blob_id" uuid not null, "seq" int not null, "hash" text not null, constraint "core_blob_part_pkey" primary key ("subscription_id", "blob_id", "seq"));`,
    );

    this.addSql(
      `create table "core_blob" ("subscription_id" uuid not null, "id" uuid not null, "size" bigint not null, "parts" int not null, "complete" boolean not null, "created_at" timestamptz not null, constraint "core_blob_pkey" primary key ("subscription_id", "id"));`,
    );
    this.addSql(`create index "core_blob_incomplete_index" on "core_blob" ("created_at") where not "complete";`);
  }

  override async down(): Promise<void> {
    this.addSql(`drop table if exists "core_blob_chunk" cascade;`);

    this.addSql(`drop table if exists "core_blob_part" cascade;`);

    this.addSql(`drop table if exists "core_blob" cascade;`);
  }
}
