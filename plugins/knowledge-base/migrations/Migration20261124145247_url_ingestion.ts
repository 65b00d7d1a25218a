import { Migration } from 'rpc-service/plugin';

export class Migration20261124145247_url_ingestion extends Migration {
  override async up(): Promise<void> {
    this.addSql(`alter table "knowledge_base_document" drop constraint if exists "knowledge_base_document_source_type_check";`);

    this.addSql(`alter table "knowledge_base_document_version" add column "source_url" text null;`);

    this.addSql(
      `alter table "knowledge_base_document" add constraint "knowledge_base_document_source_type_check" check("source_type" in ('text', 'file', 'url'));`,
    );
  }

  override async down(): Promise<void> {
    this.addSql(`alter table "knowledge_base_document" drop constraint if exists "knowledge_base_document_source_type_check";`);

    this.addSql(`alter table "knowledge_base_document_version" drop column "source_url";`);

    this.addSql(`alter table "knowledge_base_document" add constraint "knowledge_base_document_source_type_check" check("source_type" in ('text', 'file'));`);
  }
}
