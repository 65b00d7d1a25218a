import { Migration } from 'rpc-service/plugin';

export class Migration20261126154935_tenant_keys extends Migration {
  override async up(): Promise<void> {
    this.addSql(`alter table "notification" drop constraint "notification_user_id_dedupe_key_unique";`);
    this.addSql(`alter table "notification" drop constraint "notification_pkey";`);

    this.addSql(
      `alter table "notification" add constraint "notification_subscription_id_user_id_dedupe_key_unique" unique ("subscription_id", "user_id", "dedupe_key");`,
    );
    this.addSql(`alter table "notification" add constraint "notification_pkey" primary key ("subscription_id", "id");`);
  }

  override async down(): Promise<void> {
    this.addSql(`alter table "notification" drop constraint "notification_subscription_id_user_id_dedupe_key_unique";`);
    this.addSql(`alter table "notification" drop constraint "notification_pkey";`);

    this.addSql(`alter table "notification" add constraint "notification_user_id_dedupe_key_unique" unique ("user_id", "dedupe_key");`);
    this.addSql(`alter table "notification" add constraint "notification_pkey" primary key ("id");`);
  }
}
