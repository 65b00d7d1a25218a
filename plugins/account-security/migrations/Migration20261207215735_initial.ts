import { Migration } from 'rpc-service/plugin';

export class Migration20261207215735_initial extends Migration {
  override async up(): Promise<void> {
    this.addSql(
      `create table "account_security_authenticator" ("subscription_id" uuid not null, "id" uuid not null, "user_id" uuid not null, "secret" text not null, "confirmed_at" timestamptz null, "last_step" int null, "created_at" timestamptz not null, constraint "account_security_authenticator_pkey" primary key ("subscription_id", "id"));`,
    );
    this.addSql(`create index "account_security_authenticator_user_id_index" on "account_security_authenticator" ("user_id");`);

    this.addSql(
      `create table "account_security_policy" ("subscription_id" uuid not null, "required_for" text not null, "grace_days" int not null, "covered_since" jsonb not null, "updated_at" timestamptz not null, "updated_by" uuid not null, constraint "account_security_policy_pkey" primary key ("subscription_id"));`,
    );

    this.addSql(
      `create table "account_security_passkey" ("subscription_id" uuid not null, "id" uuid not null, "user_id" uuid not null, "credential_id" text not null, "public_key" text not null, "counter" bigint not null, "transports" text not null default '', "device_type" text not null, "backed_up" boolean not null, "aaguid" text not null, "name" text not null, "created_at" timestamptz not null, "last_used_at" timestamptz null, constraint "account_security_passkey_pkey" primary key ("subscription_id", "id"));`,
    );
    this.addSql(`create index "account_security_passkey_user_id_index" on "account_security_passkey" ("user_id");`);
    this.addSql(`alter table "account_security_passkey" add constraint "account_security_passkey_credential_id_unique" unique ("credential_id");`);

    this.addSql(
      `create table "account_security_challenge" ("id" uuid not null, "challenge" text not null, "purpose" text not null, "for_subscription_id" uuid null, "for_user_id" uuid null, "ticket_id" uuid null, "session_id" uuid null, "origin" text not null, "rp_id" text not null, "expires_at" timestamptz not null, constraint "account_security_challenge_pkey" primary key ("id"));`,
    );
    this.addSql(`create index "account_security_challenge_expires_at_index" on "account_security_challenge" ("expires_at");`);

    this.addSql(
      `create table "account_security_recovery_code" ("subscription_id" uuid not null, "id" uuid not null, "user_id" uuid not null, "code_hash" text not null, "created_at" timestamptz not null, "used_at" timestamptz null, constraint "account_security_recovery_code_pkey" primary key ("subscription_id", "id"));`,
    );
    this.addSql(`create index "account_security_recovery_code_user_id_index" on "account_security_recovery_code" ("user_id");`);

    this.addSql(
      `create table "account_security_ticket" ("subscription_id" uuid not null, "id" uuid not null, "user_id" uuid not null, "token_hash" text not null, "purpose" text not null, "amr" text not null, "resume" jsonb not null, "client_ip" text not null, "user_agent" text null, "created_at" timestamptz not null, "expires_at" timestamptz not null, "claimed_until" timestamptz null, constraint "account_security_ticket_pkey" primary key ("subscription_id", "id"));`,
    );
    this.addSql(`alter table "account_security_ticket" add constraint "account_security_ticket_token_hash_unique" unique ("token_hash");`);
    this.addSql(`create index "account_security_ticket_expires_at_index" on "account_security_ticket" ("expires_at");`);
  }

  override async down(): Promise<void> {
    this.addSql(`drop table if exists "account_security_authenticator" cascade;`);

    this.addSql(`drop table if exists "account_security_policy" cascade;`);

    this.addSql(`drop table if exists "account_security_passkey" cascade;`);

    this.addSql(`drop table if exists "account_security_challenge" cascade;`);

    this.addSql(`drop table if exists "account_security_recovery_code" cascade;`);

    this.addSql(`drop table if exists "account_security_ticket" cascade;`);
  }
}
