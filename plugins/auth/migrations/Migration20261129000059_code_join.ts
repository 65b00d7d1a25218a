import { Migration } from 'rpc-service/plugin';

export class Migration20261129000059_code_join extends Migration {
  // A one-time code's question to join an account has no provider account to link.
  override async up(): Promise<void> {
    this.addSql(`alter table "auth_pending_link" alter column "provider" drop not null, alter column "subject" drop not null;`);
  }

  override async down(): Promise<void> {
    this.addSql(`delete from "auth_pending_link" where "provider" is null or "subject" is null;`);
    this.addSql(`alter table "auth_pending_link" alter column "provider" set not null, alter column "subject" set not null;`);
  }
}
