import { Migration } from 'rpc-service/plugin';

export class Migration20261126154930_tenant_keys extends Migration {
  override async up(): Promise<void> {
    this.addSql(`alter table "documents_page" drop constraint "documents_page_pkey";`);

    this.addSql(`alter table "documents_page" add constraint "documents_page_pkey" primary key ("subscription_id", "id");`);

    this.addSql(`alter table "documents_page_version" drop constraint "documents_page_version_page_id_version_unique";`);
    this.addSql(`alter table "documents_page_version" drop constraint "documents_page_version_pkey";`);

    this.addSql(
      `alter table "documents_page_version" add constraint "documents_page_version_subscription_id_page_id_version_unique" unique ("subscription_id", "page_id", "version");`,
    );
    this.addSql(`alter table "documents_page_version" add constraint "documents_page_version_pkey" primary key ("subscription_id", "id");`);
  }

  override async down(): Promise<void> {
    this.addSql(`alter table "documents_page" drop constraint "documents_page_pkey";`);

    this.addSql(`alter table "documents_page" add constraint "documents_page_pkey" primary key ("id");`);

    this.addSql(`alter table "documents_page_version" drop constraint "documents_page_version_subscription_id_page_id_version_unique";`);
    this.addSql(`alter table "documents_page_version" drop constraint "documents_page_version_pkey";`);

    this.addSql(`alter table "documents_page_version" add constraint "documents_page_version_page_id_version_unique" unique ("page_id", "version");`);
    this.addSql(`alter table "documents_page_version" add constraint "documents_page_version_pkey" primary key ("id");`);
  }
}
