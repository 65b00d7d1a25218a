import { Migration } from 'rpc-service/plugin';

export class Migration20261207190852_initial extends Migration {
  override async up(): Promise<void> {
    this.addSql(
      `create table "oauth_server_authorization" ("request_hash" text not null, "issuer" text not null, "client_id" text not null, "client_name" text not null, "client_uri" text null, "client_kind" text not null, "redirect_uri" text not null, "code_challenge" text not null, "state" text null, "door" text not null, "scopes" jsonb null, "read_only" boolean not null, "expires_at" timestamptz not null, "code_hash" text null, "approver_subscription_id" uuid null, "approver_user_id" uuid null, "granted_scopes" jsonb null, "granted_read_only" boolean null, "grant_id" uuid null, constraint "oauth_server_authorization_pkey" primary key ("request_hash"));`,
    );
    this.addSql(`alter table "oauth_server_authorization" add constraint "oauth_server_authorization_code_hash_unique" unique ("code_hash");`);

    this.addSql(
      `create table "oauth_server_client" ("id" text not null, "name" text not null, "uri" text null, "redirect_uris" jsonb not null, "created_at" timestamptz not null, constraint "oauth_server_client_pkey" primary key ("id"));`,
    );

    this.addSql(
      `create table "oauth_server_grant" ("subscription_id" uuid not null, "id" uuid not null, "user_id" uuid not null, "client_id" text not null, "client_name" text not null, "redirect_uri" text not null, "door" text not null, "scopes" jsonb null, "read_only" boolean not null, "created_at" timestamptz not null, "refreshed_at" timestamptz not null, constraint "oauth_server_grant_pkey" primary key ("subscription_id", "id"));`,
    );
    this.addSql(`create index "oauth_server_grant_user_id_index" on "oauth_server_grant" ("user_id");`);

    this.addSql(
      `create table "oauth_server_token" ("subscription_id" uuid not null, "id" uuid not null, "grant_id" uuid not null, "kind" text not null, "token_hash" text not null, "expires_at" timestamptz not null, "used_at" timestamptz null, constraint "oauth_server_token_pkey" primary key ("subscription_id", "id"));`,
    );
    this.addSql(`create index "oauth_server_token_grant_id_index" on "oauth_server_token" ("grant_id");`);
    this.addSql(`alter table "oauth_server_token" add constraint "oauth_server_token_token_hash_unique" unique ("token_hash");`);
  }

  override async down(): Promise<void> {
    this.addSql(`drop table if exists "oauth_server_authorization" cascade;`);

    this.addSql(`drop table if exists "oauth_server_client" cascade;`);

    this.addSql(`drop table if exists "oauth_server_grant" cascade;`);

    this.addSql(`drop table if exists "oauth_server_token" cascade;`);
  }
}
