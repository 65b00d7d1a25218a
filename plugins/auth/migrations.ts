import { defineMigration } from '../../core/db/migration.ts';

/** The tables of the auth plugin (users, sessions and keys are the core's). */
export const authMigrations = [
  defineMigration('0001_invite_codes', [
    `create table auth_invite_code (
      id uuid primary key,
      subscription_id uuid not null references core_subscription (id) on delete cascade,
      code_hash text not null unique,
      hint text not null,
      role text not null,
      max_uses integer not null check (max_uses > 0),
      uses integer not null default 0,
      expires_at timestamptz,
      revoked_at timestamptz,
      created_by uuid not null,
      created_at timestamptz not null)`,
    'create index auth_invite_code_subscription_idx on auth_invite_code (subscription_id, created_at)',
  ]),
  defineMigration('0002_otp_requests', [
    `create table auth_otp_request (
      id uuid primary key,
      channel text not null,
      identifier text not null,
      code_hash text not null,
      attempts integer not null default 0,
      expires_at timestamptz not null,
      verified_at timestamptz,
      consumed_at timestamptz,
      created_at timestamptz not null)`,
    'create index auth_otp_request_expiry_idx on auth_otp_request (expires_at)',
  ]),
  defineMigration('0003_oauth', [
    // A login in progress at the provider: state (hashed), PKCE verifier (sealed), nonce.
    `create table auth_oauth_state (
      state_hash text primary key,
      provider text not null,
      code_verifier text not null,
      nonce text not null,
      external_login_id uuid,
      expires_at timestamptz not null)`,
    // A login started for another program (a desktop app) that polls for its result.
    `create table auth_external_login (
      id uuid primary key,
      provider text not null,
      poll_token_hash text not null,
      session_token text,
      user_id uuid,
      completed_at timestamptz,
      consumed_at timestamptz,
      expires_at timestamptz not null,
      created_at timestamptz not null)`,
  ]),
];
