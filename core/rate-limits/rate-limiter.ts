import { sha256Hex } from '../credentials/crypto.ts';
import type { Database } from '../db/orm.ts';
import type { RowOf } from '../db/rows.ts';
import { RpcError } from '../base/errors.ts';
import type { RateLimitBucket } from './rate-limit.entity.ts';

type BucketRow = RowOf<RateLimitBucket, 'hits' | 'windowEndsAt'>;

/** A bucket and the number of hits that closes it until its window ends. */
export type Limit = readonly [bucket: string, limit: number];

/**
 * Fixed-window counters kept in the database, so every node counts the same
 * attempts. Only what can be abused is counted (failed logins, code checks,
 * code requests, signups, and the addresses a user logged in from): the hot
 * path never touches it.
 */
export class RateLimiter {
  readonly #db: Database;
  #prunedAt = 0;

  constructor(db: Database) {
    this.#db = db;
  }

  /** Bucket names hold identifiers such as e-mail addresses: only their hash is stored. */
  static bucket(kind: string, value: string): string {
    return `${kind}:${sha256Hex(value.toLowerCase())}`;
  }

  /**
   * Refuses with RATE_LIMITED when any bucket is already at its limit; the
   * Retry-After is when the last of those windows ends.
   */
  async check(limits: readonly Limit[]): Promise<void> {
    if (limits.length === 0) return;
    const rows = await this.#db.execute<BucketRow>(
      `select hits, window_ends_at from core_rate_limit
       join (values ${limits.map(() => '(?, ?::int)').join(', ')}) as given (bucket, hit_limit) using (bucket)
       where window_ends_at > now() and hits >= hit_limit`,
      limits.flat(),
    );
    if (rows.length > 0) throw this.#limited(rows);
  }

  /** The hits counted in the bucket's current window; 0 when it has none. */
  async count(bucket: string): Promise<number> {
    const [row] = await this.#db.execute<BucketRow>('select hits from core_rate_limit where bucket = ? and window_ends_at > now()', [bucket]);
    return row?.hits ?? 0;
  }

  /** Counts one attempt in every bucket; ended windows are pruned at most once a minute. */
  async hit(buckets: readonly string[], windowSeconds: number): Promise<void> {
    if (Date.now() - this.#prunedAt > 60_000) {
      this.#prunedAt = Date.now();
      await this.#db.execute('delete from core_rate_limit where window_ends_at < now()');
    }
    for (const bucket of buckets) {
      await this.#db.execute(
        `insert into core_rate_limit (bucket, hits, window_ends_at)
         values (?, 1, now() + make_interval(secs => ?))
         on conflict (bucket) do update set
           hits = case when core_rate_limit.window_ends_at <= now() then 1 else core_rate_limit.hits + 1 end,
           window_ends_at = case when core_rate_limit.window_ends_at <= now()
             then excluded.window_ends_at else core_rate_limit.window_ends_at end`,
        [bucket, windowSeconds],
      );
    }
  }

  /**
   * Counts one hit in the bucket and refuses with RATE_LIMITED when that is
   * past `limit` in the window: one statement, so nodes counting the same
   * bucket never let more through than the limit.
   */
  async take(bucket: string, limit: number, windowSeconds: number): Promise<void> {
    const [row] = await this.#db.execute<BucketRow>(
      `insert into core_rate_limit (bucket, hits, window_ends_at)
       values (?, 1, now() + make_interval(secs => ?))
       on conflict (bucket) do update set
         hits = case when core_rate_limit.window_ends_at <= now() then 1 else core_rate_limit.hits + 1 end,
         window_ends_at = case when core_rate_limit.window_ends_at <= now()
           then excluded.window_ends_at else core_rate_limit.window_ends_at end
       returning hits, window_ends_at`,
      [bucket, windowSeconds],
    );
    if (row && row.hits > limit) {
      const retryAfter = Math.max(1, Math.ceil((new Date(row.window_ends_at).getTime() - Date.now()) / 1000));
      const per = windowSeconds === 60 ? 'a minute' : windowSeconds === 3600 ? 'an hour' : `in ${windowSeconds} s`;
      throw new RpcError('RATE_LIMITED', `Rate limit of ${limit} calls ${per} reached; try again in ${retryAfter} s`, { retryAfter });
    }
  }

  async reset(buckets: readonly string[]): Promise<void> {
    await this.#db.execute('delete from core_rate_limit where bucket in (?)', [buckets]);
  }

  #limited(rows: BucketRow[]): RpcError {
    const latest = Math.max(...rows.map((row) => new Date(row.window_ends_at).getTime()));
    const retryAfter = Math.max(1, Math.ceil((latest - Date.now()) / 1000));
    return new RpcError('RATE_LIMITED', `Too many attempts; try again in ${retryAfter} s`, { retryAfter });
  }
}
