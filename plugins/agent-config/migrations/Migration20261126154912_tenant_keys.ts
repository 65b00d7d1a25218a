import { Migration } from 'rpc-service/plugin';

export class Migration20261126154912_tenant_keys extends Migration {
  override async up(): Promise<void> {
    this.addSql(`alter table "agent_config_agent" drop constraint "agent_config_agent_pkey";`);

    this.addSql(`alter table "agent_config_agent" add constraint "agent_config_agent_pkey" primary key ("subscription_id", "id");`);
  }

  override async down(): Promise<void> {
    this.addSql(`alter table "agent_config_agent" drop constraint "agent_config_agent_pkey";`);

    this.addSql(`alter table "agent_config_agent" add constraint "agent_config_agent_pkey" primary key ("id");`);
  }
}
