import { Migration } from 'rpc-service/plugin';

export class Migration20261124005640_initial extends Migration {
  override async up(): Promise<void> {
    this.addSql(
      `create table "documents_page" ("id" uuid not null, "subscription_id" uuid not null, "instance_id" text not null, "parent_id" uuid null, "title" text not null, "content" text not null, "tags" jsonb not null, "version" int not null, "is_archived" boolean not null, "created_by" uuid not null, "last_modified_by" uuid not null, "created_at" timestamptz not null, "updated_at" timestamptz not null, constraint "documents_page_pkey" primary key ("id"));`,
    );
    this.addSql(
      `create index "documents_page_subscription_id_instance_id_parent_id_index" on "documents_page" ("subscription_id", "instance_id", "parent_id");`,
    );
    this.addSql(`create unique index "documents_page_title_unique" on "documents_page" ("subscription_id", "instance_id", lower("title"));`);

    this.addSql(
      `create table "documents_page_version" ("id" uuid not null, "subscription_id" uuid not null, "page_id" uuid not null, "version" int not null, "parent_id" uuid null, "title" text not null, "content" text not null, "tags" jsonb not null, "is_archived" boolean not null, "modified_by" uuid not null, "modified_at" timestamptz not null, constraint "documents_page_version_pkey" primary key ("id"));`,
    );
    this.addSql(`create index "documents_page_version_subscription_id_page_id_index" on "documents_page_version" ("subscription_id", "page_id");`);
    this.addSql(`alter table "documents_page_version" add constraint "documents_page_version_page_id_version_unique" unique ("page_id", "version");`);
  }

  override async down(): Promise<void> {
    this.addSql(`drop table if exists "documents_page" cascade;`);

    this.addSql(`drop table if exists "documents_page_version" cascade;`);
  }
}
