import { Migration } from 'rpc-service/plugin';

export class Migration20261126154932_tenant_keys extends Migration {
  override async up(): Promise<void> {
    this.addSql(`alter table "knowledge_base_document_version" drop constraint "knowledge_base_document_version_document_id_version_unique";`);
    this.addSql(`alter table "knowledge_base_document_version" drop constraint "knowledge_base_document_version_pkey";`);

    this.addSql(
      `alter table "knowledge_base_document_version" add constraint "knowledge_base_document_version_subscription_id_d_c461c_unique" unique ("subscription_id", "document_id", "version");`,
    );
    this.addSql(`alter table "knowledge_base_document_version" add constraint "knowledge_base_document_version_pkey" primary key ("subscription_id", "id");`);

    this.addSql(`alter table "knowledge_base_chunk" drop constraint "knowledge_base_chunk_pkey";`);

    this.addSql(`alter table "knowledge_base_chunk" add constraint "knowledge_base_chunk_pkey" primary key ("subscription_id", "id");`);

    this.addSql(`alter table "knowledge_base_section" drop constraint "knowledge_base_section_pkey";`);

    this.addSql(`alter table "knowledge_base_section" add constraint "knowledge_base_section_pkey" primary key ("subscription_id", "id");`);

    this.addSql(`alter table "knowledge_base_ingestion" drop constraint "knowledge_base_ingestion_pkey";`);

    this.addSql(`alter table "knowledge_base_ingestion" add constraint "knowledge_base_ingestion_pkey" primary key ("subscription_id", "id");`);

    this.addSql(`alter table "knowledge_base_document" drop constraint "knowledge_base_document_pkey";`);

    this.addSql(`alter table "knowledge_base_document" add constraint "knowledge_base_document_pkey" primary key ("subscription_id", "id");`);
  }

  override async down(): Promise<void> {
    this.addSql(`alter table "knowledge_base_document_version" drop constraint "knowledge_base_document_version_subscription_id_d_c461c_unique";`);
    this.addSql(`alter table "knowledge_base_document_version" drop constraint "knowledge_base_document_version_pkey";`);

    this.addSql(
      `alter table "knowledge_base_document_version" add constraint "knowledge_base_document_version_document_id_version_unique" unique ("document_id", "version");`,
    );
    this.addSql(`alter table "knowledge_base_document_version" add constraint "knowledge_base_document_version_pkey" primary key ("id");`);

    this.addSql(`alter table "knowledge_base_chunk" drop constraint "knowledge_base_chunk_pkey";`);

    this.addSql(`alter table "knowledge_base_chunk" add constraint "knowledge_base_chunk_pkey" primary key ("id");`);

    this.addSql(`alter table "knowledge_base_section" drop constraint "knowledge_base_section_pkey";`);

    this.addSql(`alter table "knowledge_base_section" add constraint "knowledge_base_section_pkey" primary key ("id");`);

    this.addSql(`alter table "knowledge_base_ingestion" drop constraint "knowledge_base_ingestion_pkey";`);

    this.addSql(`alter table "knowledge_base_ingestion" add constraint "knowledge_base_ingestion_pkey" primary key ("id");`);

    this.addSql(`alter table "knowledge_base_document" drop constraint "knowledge_base_document_pkey";`);

    this.addSql(`alter table "knowledge_base_document" add constraint "knowledge_base_document_pkey" primary key ("id");`);
  }
}
