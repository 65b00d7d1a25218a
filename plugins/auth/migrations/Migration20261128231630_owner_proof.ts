import { Migration } from 'rpc-service/plugin';

export class Migration20261128231630_owner_proof extends Migration {
  override async up(): Promise<void> {
    this.addSql(
      `create table "auth_pending_link" ("token_hash" text not null, "provider" text not null, "subject" text not null, "email" text not null, "user_id" uuid not null, "external_login_id" uuid null, "expires_at" timestamptz not null, constraint "auth_pending_link_pkey" primary key ("token_hash"));`,
    );

    this.addSql(
      `alter table "auth_user" add column "email_proven" text null, add column "email_proven_by" text null, add column "declared_profiles" jsonb not null default '[]';`,
    );

    // An address a provider verified when its owner signed in with it (the only maker of links) is proven by that sign-in.
    this.addSql(`update "auth_user" u set "email_proven" = lower(u."email"), "email_proven_by" = 'oauth'
      where exists (select 1 from "auth_oauth_link" l where l."subscription_id" = u."subscription_id" and l."user_id" = u."id" and lower(l."email") = lower(u."email"));`);
  }

  override async down(): Promise<void> {
    this.addSql(`drop table if exists "auth_pending_link" cascade;`);

    this.addSql(`alter table "auth_user" drop column "email_proven", drop column "email_proven_by", drop column "declared_profiles";`);
  }
}
