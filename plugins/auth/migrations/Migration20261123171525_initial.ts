import { Migration } from 'rpc-service/plugin';

export class Migration20261123171525_initial extends Migration {
  override async up(): Promise<void> {
    this.addSql(
      `create table "auth_external_login" ("id" uuid not null, "provider" text not null, "poll_token_hash" text not null, "session_token" text null, "user_id" uuid null, "completed_at" timestamptz null, "consumed_at" timestamptz null, "expires_at" timestamptz not null, "created_at" timestamptz not null, constraint "auth_external_login_pkey" primary key ("id"));`,
    );

    this.addSql(
      `create table "auth_invite_code" ("id" uuid not null, "subscription_id" uuid not null, "code_hash" text not null, "hint" text not null, "role" text not null, "max_uses" int not null, "uses" int not null default 0, "expires_at" timestamptz null, "revoked_at" timestamptz null, "created_by" uuid not null, "created_at" timestamptz not null, constraint "auth_invite_code_pkey" primary key ("id"));`,
    );
    this.addSql(`alter table "auth_invite_code" add constraint "auth_invite_code_code_hash_unique" unique ("code_hash");`);
    this.addSql(`create index "auth_invite_code_subscription_id_created_at_index" on "auth_invite_code" ("subscription_id", "created_at");`);

    this.addSql(
      `create table "auth_oauth_state" ("state_hash" text not null, "provider" text not null, "code_verifier" text not null, "nonce" text not null, "external_login_id" uuid null, "expires_at" timestamptz not null, constraint "auth_oauth_state_pkey" primary key ("state_hash"));`,
    );

    this.addSql(
      `create table "auth_otp_request" ("id" uuid not null, "channel" text not null, "identifier" text not null, "code_hash" text not null, "attempts" int not null default 0, "expires_at" timestamptz not null, "verified_at" timestamptz null, "consumed_at" timestamptz null, "created_at" timestamptz not null, constraint "auth_otp_request_pkey" primary key ("id"));`,
    );
    this.addSql(`create index "auth_otp_request_expires_at_index" on "auth_otp_request" ("expires_at");`);

    this.addSql(
      `create table "auth_session" ("id" uuid not null, "subscription_id" uuid not null, "user_id" uuid not null, "token_hash" text not null, "created_at" timestamptz not null, "last_seen_at" timestamptz not null, "expires_at" timestamptz not null, constraint "auth_session_pkey" primary key ("id"));`,
    );
    this.addSql(`create index "auth_session_user_id_index" on "auth_session" ("user_id");`);
    this.addSql(`alter table "auth_session" add constraint "auth_session_token_hash_unique" unique ("token_hash");`);

    this.addSql(
      `create table "auth_subscription" ("id" uuid not null, "name" text not null, "service_code" text null, "created_at" timestamptz not null, "updated_at" timestamptz not null, constraint "auth_subscription_pkey" primary key ("id"));`,
    );

    this.addSql(
      `create table "auth_user" ("id" uuid not null, "subscription_id" uuid not null, "email" text not null, "username" text not null, "password_hash" text null, "first_name" text null, "last_name" text null, "role" text not null, "is_active" boolean not null default true, "is_verified" boolean not null default false, "is_phone_verified" boolean not null default false, "phone_number" text null, "onboarding_completed" boolean not null default false, "oauth_profiles" jsonb not null default '[]', "partner_contact_id" text null, "profile_picture" text null, "job_title" text null, "department" text null, "service_code" text null, "created_at" timestamptz not null, "updated_at" timestamptz not null, constraint "auth_user_pkey" primary key ("id"));`,
    );
    this.addSql(`create index "auth_user_subscription_id_index" on "auth_user" ("subscription_id");`);
    this.addSql(`create unique index "auth_user_email_key" on "auth_user" (lower("email"));`);
    this.addSql(`create unique index "auth_user_username_key" on "auth_user" (lower("username"));`);
  }

  override async down(): Promise<void> {
    this.addSql(`drop table if exists "auth_external_login" cascade;`);

    this.addSql(`drop table if exists "auth_invite_code" cascade;`);

    this.addSql(`drop table if exists "auth_oauth_state" cascade;`);

    this.addSql(`drop table if exists "auth_otp_request" cascade;`);

    this.addSql(`drop table if exists "auth_session" cascade;`);

    this.addSql(`drop table if exists "auth_subscription" cascade;`);

    this.addSql(`drop table if exists "auth_user" cascade;`);
  }
}
