import { Migration } from '../migration.ts';

export class Migration20261126154909_tenant_keys extends Migration {
  override async up(): Promise<void> {
    this.addSql(`alter table "core_audit_log" drop constraint "core_audit_log_pkey";`);

    this.addSql(`alter table "core_audit_log" add constraint "core_audit_log_pkey" primary key ("subscription_id", "id");`);

    this.addSql(`alter table "core_data_key" drop constraint "core_data_key_pkey";`);

    this.addSql(`alter table "core_data_key" add constraint "core_data_key_pkey" primary key ("subscription_id", "id");`);

    this.addSql(`drop index "core_file_subscription_id_index";`);
    this.addSql(`alter table "core_file" drop constraint "core_file_pkey";`);

    this.addSql(`alter table "core_file" add constraint "core_file_pkey" primary key ("subscription_id", "id");`);

    this.addSql(`alter table "core_upload_key" drop constraint "core_upload_key_key_hash_unique";`);
    this.addSql(`alter table "core_upload_key" drop constraint "core_upload_key_pkey";`);

    this.addSql(`alter table "core_upload_key" add constraint "core_upload_key_subscription_id_key_hash_unique" unique ("subscription_id", "key_hash");`);
    this.addSql(`alter table "core_upload_key" add constraint "core_upload_key_pkey" primary key ("subscription_id", "id");`);
  }

  override async down(): Promise<void> {
    this.addSql(`alter table "core_audit_log" drop constraint "core_audit_log_pkey";`);

    this.addSql(`alter table "core_audit_log" add constraint "core_audit_log_pkey" primary key ("id");`);

    this.addSql(`alter table "core_data_key" drop constraint "core_data_key_pkey";`);

    this.addSql(`alter table "core_data_key" add constraint "core_data_key_pkey" primary key ("id");`);

    this.addSql(`alter table "core_file" drop constraint "core_file_pkey";`);

    this.addSql(`create index "core_file_subscription_id_index" on "core_file" ("subscription_id");`);
    this.addSql(`alter table "core_file" add constraint "core_file_pkey" primary key ("id");`);

    this.addSql(`alter table "core_upload_key" drop constraint "core_upload_key_subscription_id_key_hash_unique";`);
    this.addSql(`alter table "core_upload_key" drop constraint "core_upload_key_pkey";`);

    this.addSql(`alter table "core_upload_key" add constraint "core_upload_key_key_hash_unique" unique ("key_hash");`);
    this.addSql(`alter table "core_upload_key" add constraint "core_upload_key_pkey" primary key ("id");`);
  }
}
