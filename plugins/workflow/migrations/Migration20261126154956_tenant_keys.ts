import { Migration } from 'rpc-service/plugin';

export class Migration20261126154956_tenant_keys extends Migration {
  override async up(): Promise<void> {
    this.addSql(`alter table "workflow_pending_event" drop constraint "workflow_pending_event_pkey";`);

    this.addSql(`alter table "workflow_pending_event" add constraint "workflow_pending_event_pkey" primary key ("subscription_id", "id");`);

    this.addSql(`alter table "workflow_definition" drop constraint "workflow_definition_pkey";`);

    this.addSql(`alter table "workflow_definition" add constraint "workflow_definition_pkey" primary key ("subscription_id", "id");`);

    this.addSql(`alter table "workflow_instance" drop constraint "workflow_instance_pkey";`);

    this.addSql(`alter table "workflow_instance" add constraint "workflow_instance_pkey" primary key ("subscription_id", "id");`);
  }

  override async down(): Promise<void> {
    this.addSql(`alter table "workflow_pending_event" drop constraint "workflow_pending_event_pkey";`);

    this.addSql(`alter table "workflow_pending_event" add constraint "workflow_pending_event_pkey" primary key ("id");`);

    this.addSql(`alter table "workflow_definition" drop constraint "workflow_definition_pkey";`);

    this.addSql(`alter table "workflow_definition" add constraint "workflow_definition_pkey" primary key ("id");`);

    this.addSql(`alter table "workflow_instance" drop constraint "workflow_instance_pkey";`);

    this.addSql(`alter table "workflow_instance" add constraint "workflow_instance_pkey" primary key ("id");`);
  }
}
