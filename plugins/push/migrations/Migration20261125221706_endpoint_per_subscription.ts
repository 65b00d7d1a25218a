import { Migration } from 'rpc-service/plugin';

export class Migration20261125221706_endpoint_per_subscription extends Migration {
  override async up(): Promise<void> {
    this.addSql(`alter table "push_subscription" drop constraint "push_subscription_endpoint_unique";`);

    this.addSql(`alter table "push_subscription" add constraint "push_subscription_subscription_id_endpoint_unique" unique ("subscription_id", "endpoint");`);
  }

  override async down(): Promise<void> {
    // Endpoints unique again across subscriptions: of those sharing one, the latest subscribed is kept.
    this.addSql(
      `delete from "push_subscription" a using "push_subscription" b where a."endpoint" = b."endpoint" and (a."updated_at", a."id") < (b."updated_at", b."id");`,
    );
    this.addSql(`alter table "push_subscription" drop constraint "push_subscription_subscription_id_endpoint_unique";`);

    this.addSql(`alter table "push_subscription" add constraint "push_subscription_endpoint_unique" unique ("endpoint");`);
  }
}
