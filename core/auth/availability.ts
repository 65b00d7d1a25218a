import type { Database } from '../db/orm.ts';
import { conflict } from '../rpc/errors.ts';

/**
 * E-mail addresses and usernames are unique across the whole service,
 * case-insensitively, since login takes either without naming a subscription.
 * The unique indexes enforce it; this gives the caller a clear message first.
 */
export async function assertIdentityAvailable(
  db: Database,
  { email, username }: { email?: string; username?: string },
  exceptUserId?: string,
): Promise<void> {
  const [taken] = await db.execute<{ email_taken: boolean; username_taken: boolean }>(
    `select exists(select 1 from core_user where lower(email) = lower(?) and id is distinct from ?) as email_taken,
            exists(select 1 from core_user where lower(username) = lower(?) and id is distinct from ?) as username_taken`,
    [email ?? null, exceptUserId ?? null, username ?? null, exceptUserId ?? null],
  );
  if (email !== undefined && taken?.email_taken) throw conflict('This e-mail address is already registered');
  if (username !== undefined && taken?.username_taken) throw conflict('This username is already taken');
}
