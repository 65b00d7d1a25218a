import { Migration } from 'rpc-service/plugin';

export class Migration20261207211515_session_devices extends Migration {
  // A session made before these columns counts as signed in when it was made, by means unknown (an empty amr).
  override async up(): Promise<void> {
    this.addSql(
      `alter table "auth_session" add column "amr" text not null default '', add column "signed_in_at" timestamptz null, add column "ip_address" text null, add column "user_agent" text null;`,
    );
    this.addSql(`update "auth_session" set "signed_in_at" = "created_at";`);
    this.addSql(`alter table "auth_session" alter column "signed_in_at" set not null;`);
  }

  override async down(): Promise<void> {
    this.addSql(`alter table "auth_session" drop column "amr", drop column "signed_in_at", drop column "ip_address", drop column "user_agent";`);
  }
}
