import { Migration } from 'rpc-service/plugin';

export class Migration20261126051946_scopes_and_limits extends Migration {
  override async up(): Promise<void> {
    this.addSql(
      `alter table "api_key" add column "scopes" text[] null, add column "read_only" boolean not null default false, add column "rate_limit_per_minute" int null;`,
    );
  }

  override async down(): Promise<void> {
    this.addSql(`alter table "api_key" drop column "scopes", drop column "read_only", drop column "rate_limit_per_minute";`);
  }
}
