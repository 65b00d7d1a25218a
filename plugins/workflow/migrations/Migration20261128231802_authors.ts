import { Migration } from 'rpc-service/plugin';

export class Migration20261128231802_authors extends Migration {
  override async up(): Promise<void> {
    // Saved before authors were kept: a workflow was shaped by its creator, a run by its starter, as far as anyone can tell.
    this.addSql(`alter table "workflow_definition" add column "authors" jsonb not null default '[]';`);
    this.addSql(`update "workflow_definition" set "authors" = jsonb_build_array(jsonb_build_object('userId', "user_id"));`);
    this.addSql(`alter table "workflow_definition" alter column "authors" drop default;`);
    this.addSql(`alter table "workflow_instance" add column "chain" jsonb not null default '[]';`);
    this.addSql(`update "workflow_instance" set "chain" = jsonb_build_array(jsonb_build_object('userId', "user_id"));`);
    this.addSql(`alter table "workflow_instance" alter column "chain" drop default;`);
  }

  override async down(): Promise<void> {
    this.addSql(`alter table "workflow_definition" drop column "authors";`);
    this.addSql(`alter table "workflow_instance" drop column "chain";`);
  }
}
