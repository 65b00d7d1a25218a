import { Migration } from 'rpc-service/plugin';

export class Migration20261125230608_oauth_link extends Migration {
  override async up(): Promise<void> {
    this.addSql(
      `create table "auth_oauth_link" ("provider" text not null, "subject" text not null, "user_id" uuid not null, "subscription_id" uuid not null, "email" text null, "created_at" timestamptz not null, constraint "auth_oauth_link_pkey" primary key ("provider", "subject"));`,
    );
    this.addSql(`create index "auth_oauth_link_user_id_index" on "auth_oauth_link" ("user_id");`);

    // A profile the OAuth login wrote carries the verified address it linked by, the user's own. Any other (set through
    // AdminUserRpc, possibly on several users) is dropped rather than trusted; its owner links again by signing in.
    this.addSql(`with "linked" as (
      select distinct on (u."id", p."value"->>'provider', p."value"->>'id')
        p."value"->>'provider' as "provider", p."value"->>'id' as "subject", u."id" as "user_id", u."subscription_id", u."email", u."updated_at"
      from "auth_user" u cross join lateral jsonb_array_elements(u."oauth_profiles") p
      where jsonb_typeof(p."value"->'provider') = 'string' and jsonb_typeof(p."value"->'id') = 'string'
        and jsonb_typeof(p."value"->'email') = 'string' and lower(p."value"->>'email') = lower(u."email")
    ), "held" as (select *, count(*) over (partition by "provider", "subject") as "holders" from "linked")
    insert into "auth_oauth_link" ("provider", "subject", "user_id", "subscription_id", "email", "created_at")
    select "provider", "subject", "user_id", "subscription_id", "email", "updated_at" from "held" where "holders" = 1;`);

    this.addSql(`alter table "auth_user" drop column "oauth_profiles";`);
  }

  override async down(): Promise<void> {
    this.addSql(`alter table "auth_user" add column "oauth_profiles" jsonb not null default '[]';`);
    this.addSql(`update "auth_user" u set "oauth_profiles" = (
      select jsonb_agg(jsonb_strip_nulls(jsonb_build_object('provider', l."provider", 'id', l."subject", 'email', l."email")) order by l."created_at")
      from "auth_oauth_link" l where l."user_id" = u."id"
    ) where exists (select 1 from "auth_oauth_link" l where l."user_id" = u."id");`);

    this.addSql(`drop table if exists "auth_oauth_link" cascade;`);
  }
}
