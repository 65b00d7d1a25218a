/**
 * Statements that reach tenant tables without a subscription_id condition on
 * purpose: the service's own work across tenants, or lookups made before the
 * tenant is known (docs/scaling.md, "What would change"). `match` is tested
 * against the statement with its whitespace collapsed; `tables` are the
 * tenant tables it may reach unkeyed.
 */
export interface Allowed {
  tables: readonly string[];
  match: RegExp;
  reason: string;
}

export const ALLOW_LIST: readonly Allowed[] = [
  // Before the tenant is known.
  {
    tables: ['auth_user'],
    match: /^select subscription_id, id, password_hash, is_active from auth_user where lower\(email\) = lower\(\?\) or lower\(username\) = lower\(\?\)/,
    reason: 'login looks the user up by e-mail or username before the tenant is known',
  },
  {
    tables: ['auth_user'],
    match: /^select exists\(select 1 from auth_user where lower\(email\) = lower\(\?\) and id is distinct from \?\) as email_taken/,
    reason: 'e-mail addresses and usernames are unique across the service, since login names no tenant',
  },
  {
    tables: ['auth_session', 'auth_user'],
    match: /^select s\.id, s\.subscription_id, .* from auth_session s join auth_user u on .* where s\.token_hash = \?$/,
    reason: 'a session token is looked up by its hash before its tenant is known',
  },
  {
    tables: ['oauth_server_grant', 'oauth_server_token'],
    match:
      /^select t\.subscription_id, t\.grant_id, .* from oauth_server_token t join oauth_server_grant g on g\.subscription_id = t\.subscription_id and .* where t\.token_hash = \? and t\.kind = 'access'$/,
    reason: "an app's access token is looked up by its hash before its tenant is known",
  },
  {
    tables: ['oauth_server_token'],
    match: /^select subscription_id, grant_id, (kind|expires_at, used_at) from oauth_server_token where token_hash = \?( and kind = 'refresh')?$/,
    reason: 'a refresh token (or any token being revoked) is looked up by its hash before its tenant is known',
  },
  {
    tables: ['oauth_server_grant', 'oauth_server_token'],
    match:
      /^with gone as \(delete from oauth_server_(token where expires_at < \?|grant g where not exists \(select 1 from oauth_server_token t where t\.subscription_id = g\.subscription_id and t\.grant_id = g\.id\)) returning 1\) select count\(\*\)::int as n from gone$/,
    reason: "the OAuth sweep removes every tenant's expired tokens and the grants none is left for (plugins/oauth-server/oauth-server.service.ts)",
  },
  {
    tables: ['oauth_server_grant'],
    match:
      /^with gone as \(delete from oauth_server_client c where c\.created_at < \? and not exists \(select 1 from oauth_server_grant g where g\.client_id = c\.id\) .*returning 1\) select count\(\*\)::int as n from gone$/,
    reason: 'the OAuth sweep keeps a registered client that any tenant has a grant for (clients belong to no tenant)',
  },
  {
    tables: ['account_security_ticket'],
    match:
      /^select subscription_id, id, user_id, purpose, amr, resume, client_ip, user_agent, expires_at from account_security_ticket where token_hash = \? and expires_at > now\(\)$/,
    reason: "a sign-in's ticket (its second step) is looked up by its hash before its tenant is known",
  },
  {
    tables: ['account_security_passkey'],
    match: /^select subscription_id, id from account_security_passkey where credential_id = \?$/,
    reason: 'a sign-in with a passkey and no username finds the passkey by its credential id before the tenant is known',
  },
  {
    tables: ['account_security_ticket'],
    match: /^with gone as \(delete from account_security_ticket where expires_at < now\(\) returning 1\) select count\(\*\)::int as n from gone$/,
    reason: "the hourly sweep removes every tenant's expired sign-in tickets (plugins/account-security/tickets.ts)",
  },
  {
    tables: ['api_key'],
    match: /^select "a0"\.\* from "api_key" as "a0" where "a0"\."prefix" = \? limit \?$/,
    reason: 'an API key is looked up by its prefix before its tenant is known',
  },
  {
    tables: ['auth_invite_code'],
    match: /^select 1 from auth_invite_code where code_hash = \? /,
    reason: 'an invite code is checked by its hash at signup, before the tenant is known',
  },
  {
    tables: ['auth_user', 'auth_oauth_link'],
    match:
      /from "auth_oauth_link" as "a0" where "a0"\."provider" = \? and "a0"\."subject" = \?|^select subscription_id, id from auth_user where lower\(email\) = \?$/,
    reason: 'an OpenID Connect login (or the question before joining an account) finds the provider account or the e-mail before the tenant is known',
  },
  {
    tables: ['auth_user'],
    match: /^select subscription_id, id, password_hash, is_active from auth_user where (?:lower\(email\) = \?|phone_number = \? and is_phone_verified)$/,
    reason: 'a login with a one-time code looks the user up by the e-mail address or phone number before the tenant is known',
  },
  {
    tables: ['auth_invite_code'],
    match: /^update auth_invite_code set uses = uses \+ 1 where code_hash = \? /,
    reason: 'an invite code is spent by its hash at signup, before the tenant is known: it is what names the tenant',
  },
  {
    tables: ['auth_oauth_link'],
    match: /^select subscription_id, user_id from auth_oauth_link where provider = \? and subject = \?$/,
    reason: "an OAuth login finds the account linked to the provider's subject before the tenant is known",
  },
  {
    tables: ['auth_user'],
    match: /^select 1 from auth_user where lower\(username\) = lower\(\?\)$|^select exists\(select 1 from auth_user\) as exists$/,
    reason: 'usernames are unique across the service (an OAuth signup picks a free one), and the first signup of an installation is told apart from the others',
  },
  // The service's work over every tenant.
  {
    tables: ['scheduler_task'],
    match: /^select id, subscription_id, .* from scheduler_task where enabled and next_run <= now\(\) order by next_run limit 100 for update skip locked$/,
    reason: 'the scheduler claims the due tasks of every tenant',
  },
  {
    tables: ['scheduler_task'],
    match:
      /^select extract\(epoch from min\(next_run\) - clock_timestamp\(\)\) \* 1000 as due_in_ms from scheduler_task where enabled and next_run is not null$/,
    reason: 'the scheduler finds when the next task of any tenant is due, to look for it then (one index entry; on Citus, one per shard)',
  },
  {
    tables: ['scheduler_run'],
    match: /^update scheduler_run set .* where id in \(select id from scheduler_run where status = 'running' and attempts [<>]=? \? and fired_at < now\(\)/,
    reason: 'the scheduler takes back the runs of every tenant whose node stopped',
  },
  {
    tables: ['workflow_instance'],
    match:
      /^update workflow_instance set lease_until = \?, updated_at = now\(\) where id in \(select id from workflow_instance where status = 'running' and lease_until < now\(\)|^select id, subscription_id from workflow_instance where status = 'waiting' and wake_at < now\(\)/,
    reason: 'the workflow runner takes back the runs of every tenant whose node stopped, and wakes those whose wait is over',
  },
  {
    tables: ['process_executor_instance'],
    match:
      /^update process_executor_instance set status = 'failed', .* where \(subscription_id, id\) in \( select subscription_id, id from process_executor_instance where status = 'running' and \(lease_until is null or lease_until < now\(\)\)|^update process_executor_instance set lease_until = now\(\) \+ make_interval\(secs => \?\) where node_id = \? and status = 'running'/,
    reason: "the process executor renews the leases of its node's processes and ends those of every tenant whose node stopped",
  },
  {
    tables: ['api_management_delivery'],
    match:
      /^select subscription_id, api_key_id from \( select distinct on \(api_key_id\) .* from api_management_delivery where state = 'pending'|^delete from api_management_delivery where state <> 'pending' and created_at < now\(\)/,
    reason: "the webhook sender finds every tenant's endpoints left with due deliveries, and prunes old deliveries",
  },
  {
    tables: ['api_key', 'api_management_webhook'],
    match:
      /^select (?:id|api_key_id), subscription_id, (?:encrypted_key|secret) from (?:api_key|api_management_webhook) where (?:encrypted_key|secret) not like 'k1\.%'$/,
    reason: "re-sealing, once at start, the values of every tenant sealed before the keyring (each update then names its row's subscription)",
  },
  {
    tables: ['core_blob'],
    match: /^select subscription_id, id from core_blob where not complete and created_at < \?$/,
    reason: "the blob sweep finds every tenant's abandoned uploads (each removal then names its subscription)",
  },
  {
    tables: ['core_file', 'core_upload_key'],
    match:
      /^delete from core_file where finalized_at is null and \(upload_key_id is null or upload_key_id in \(select k\.id from core_upload_key k where k\.subscription_id = core_file\.subscription_id and k\.expires_at < \?\)\)|^delete from core_upload_key where expires_at < \?$/,
    reason:
      "the upload sweep removes every tenant's expired upload keys and the files left unfinished, each file's key looked up in its own subscription (core/uploads/upload-service.ts)",
  },
  {
    tables: ['core_file'],
    match:
      /^select count\(\*\)::int as total from core_file$|^select id, subscription_id, storage_path, size from core_file where id::text > \? order by id::text limit \?$/,
    reason: "the operator's `files to-database` command moves every tenant's files from disk into the database",
  },
  {
    tables: ['knowledge_base_chunk', 'memory'],
    match:
      /^update (?:knowledge_base_chunk|memory) set embedding_[ab] = null where id in \(select id from (?:knowledge_base_chunk|memory) where id > \? |^select (?:id|subscription_id) from (?:knowledge_base_chunk|memory) where embedding_[ab] is null and .* limit 1$/,
    reason: "a change of embedding model re-embeds every tenant's rows, and clears the old column of all of them once done (core/ai/embedding-columns.ts)",
  },
];
