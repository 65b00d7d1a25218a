import { Migration } from 'rpc-service/plugin';

export class Migration20261128231208_authors extends Migration {
  override async up(): Promise<void> {
    // A task saved before authors were kept was shaped by its creator as far as anyone can tell.
    this.addSql(`alter table "scheduler_task" add column "authors" jsonb not null default '[]';`);
    this.addSql(`update "scheduler_task" set "authors" = jsonb_build_array(jsonb_build_object('userId', "created_by"));`);
    this.addSql(`alter table "scheduler_task" alter column "authors" drop default;`);
  }

  override async down(): Promise<void> {
    this.addSql(`alter table "scheduler_task" drop column "authors";`);
  }
}
