import { Migration } from 'rpc-service/plugin';

export class Migration20261126130855_repositories extends Migration {
  override async up(): Promise<void> {
    this.addSql(
      `create table "checkpoint_file" ("subscription_id" uuid not null, "scope" varchar(64) not null, "path" text not null, "head_oid" varchar(40) null, "work_oid" varchar(40) null, "size" int not null, "content" bytea null, constraint "checkpoint_file_pkey" primary key ("subscription_id", "scope", "path"));`,
    );

    this.addSql(
      `create table "checkpoint_object" ("subscription_id" uuid not null, "scope" varchar(64) not null, "oid" varchar(40) not null, "size" int null, "data" bytea not null, constraint "checkpoint_object_pkey" primary key ("subscription_id", "scope", "oid"));`,
    );

    this.addSql(
      `create table "checkpoint_ref" ("subscription_id" uuid not null, "scope" varchar(64) not null, "name" varchar(200) not null, "oid" varchar(40) not null, constraint "checkpoint_ref_pkey" primary key ("subscription_id", "scope", "name"));`,
    );

    this.addSql(
      `create table "checkpoint_scope" ("subscription_id" uuid not null, "name" varchar(64) not null, "created_at" timestamptz not null, constraint "checkpoint_scope_pkey" primary key ("subscription_id", "name"));`,
    );
  }

  override async down(): Promise<void> {
    this.addSql(`drop table if exists "checkpoint_file" cascade;`);

    this.addSql(`drop table if exists "checkpoint_object" cascade;`);

    this.addSql(`drop table if exists "checkpoint_ref" cascade;`);

    this.addSql(`drop table if exists "checkpoint_scope" cascade;`);
  }
}
