import { Migration } from 'rpc-service/plugin';

export class Migration20261125221702_subscription_scoped_id extends Migration {
  override async up(): Promise<void> {
    this.addSql(`alter table "memory_memory" drop constraint "memory_memory_pkey";`);

    this.addSql(`alter table "memory_memory" add constraint "memory_memory_pkey" primary key ("subscription_id", "id");`);
  }

  override async down(): Promise<void> {
    // Ids unique again across subscriptions: of memories sharing an id, one is kept.
    this.addSql(`delete from "memory_memory" a using "memory_memory" b where a."id" = b."id" and a."subscription_id" > b."subscription_id";`);
    this.addSql(`alter table "memory_memory" drop constraint "memory_memory_pkey";`);

    this.addSql(`alter table "memory_memory" add constraint "memory_memory_pkey" primary key ("id");`);
  }
}
