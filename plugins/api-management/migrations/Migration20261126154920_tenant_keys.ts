import { Migration } from 'rpc-service/plugin';

export class Migration20261126154920_tenant_keys extends Migration {
  override async up(): Promise<void> {
    this.addSql(`alter table "api_management_webhook" drop constraint "api_management_webhook_pkey";`);

    this.addSql(`alter table "api_management_webhook" add constraint "api_management_webhook_pkey" primary key ("subscription_id", "api_key_id");`);

    this.addSql(`alter table "api_management_delivery" drop constraint "api_management_delivery_event_id_api_key_id_unique";`);
    this.addSql(`alter table "api_management_delivery" drop constraint "api_management_delivery_pkey";`);

    this.addSql(
      `alter table "api_management_delivery" add constraint "api_management_delivery_subscription_id_event_id__f5a59_unique" unique ("subscription_id", "event_id", "api_key_id");`,
    );
    this.addSql(`alter table "api_management_delivery" add constraint "api_management_delivery_pkey" primary key ("subscription_id", "id");`);
  }

  override async down(): Promise<void> {
    this.addSql(`alter table "api_management_webhook" drop constraint "api_management_webhook_pkey";`);

    this.addSql(`alter table "api_management_webhook" add constraint "api_management_webhook_pkey" primary key ("api_key_id");`);

    this.addSql(`alter table "api_management_delivery" drop constraint "api_management_delivery_subscription_id_event_id__f5a59_unique";`);
    this.addSql(`alter table "api_management_delivery" drop constraint "api_management_delivery_pkey";`);

    this.addSql(`alter table "api_management_delivery" add constraint "api_management_delivery_event_id_api_key_id_unique" unique ("event_id", "api_key_id");`);
    this.addSql(`alter table "api_management_delivery" add constraint "api_management_delivery_pkey" primary key ("id");`);
  }
}
