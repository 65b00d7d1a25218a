import { Migration } from '../migration.ts';

export class Migration20261125162418_notification_dedupe_key extends Migration {
  override async up(): Promise<void> {
    this.addSql(`alter table "core_notification" add column "dedupe_key" text null;`);
    this.addSql(`alter table "core_notification" add constraint "core_notification_user_id_dedupe_key_unique" unique ("user_id", "dedupe_key");`);
  }

  override async down(): Promise<void> {
    this.addSql(`alter table "core_notification" drop constraint "core_notification_user_id_dedupe_key_unique";`);
    this.addSql(`alter table "core_notification" drop column "dedupe_key";`);
  }
}
