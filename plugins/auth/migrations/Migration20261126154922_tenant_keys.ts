import { Migration } from 'rpc-service/plugin';

export class Migration20261126154922_tenant_keys extends Migration {
  override async up(): Promise<void> {
    this.addSql(`alter table "auth_invite_code" drop constraint "auth_invite_code_pkey";`);

    this.addSql(`alter table "auth_invite_code" add constraint "auth_invite_code_pkey" primary key ("subscription_id", "id");`);

    this.addSql(`alter table "auth_session" drop constraint "auth_session_pkey";`);

    this.addSql(`alter table "auth_session" add constraint "auth_session_pkey" primary key ("subscription_id", "id");`);

    this.addSql(`drop index "auth_user_subscription_id_index";`);
    this.addSql(`alter table "auth_user" drop constraint "auth_user_pkey";`);

    this.addSql(`alter table "auth_user" add constraint "auth_user_pkey" primary key ("subscription_id", "id");`);
  }

  override async down(): Promise<void> {
    this.addSql(`alter table "auth_invite_code" drop constraint "auth_invite_code_pkey";`);

    this.addSql(`alter table "auth_invite_code" add constraint "auth_invite_code_pkey" primary key ("id");`);

    this.addSql(`alter table "auth_session" drop constraint "auth_session_pkey";`);

    this.addSql(`alter table "auth_session" add constraint "auth_session_pkey" primary key ("id");`);

    this.addSql(`alter table "auth_user" drop constraint "auth_user_pkey";`);

    this.addSql(`create index "auth_user_subscription_id_index" on "auth_user" ("subscription_id");`);
    this.addSql(`alter table "auth_user" add constraint "auth_user_pkey" primary key ("id");`);
  }
}
