import { randomBytes, randomUUID } from 'node:crypto';
import type { Database } from '../db/orm.ts';
import { gcmOpen, gcmSeal } from './crypto.ts';
import type { MasterKey, MasterKeys } from './master-key.ts';

const PREFIX = 'k1.';
const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;
/** Data keys kept unwrapped in memory; past this many, the cache starts over. */
const CACHE_LIMIT = 10_000;

export interface DataKeyRow {
  id: string;
  subscription_id: string;
  wraps: Record<string, string> | string;
}

interface DataKey {
  id: string;
  subscriptionId: string;
  key: Buffer;
}

export interface RewrapResult {
  /** Data keys wrapped again under the current master key. */
  rewrapped: number;
  /** Data keys already wrapped by the current master key alone. */
  current: number;
}

const wrapAad = (dataKeyId: string, subscriptionId: string): string => `${dataKeyId}:${subscriptionId}`;
const wrapsOf = (row: DataKeyRow): Record<string, string> => (typeof row.wraps === 'string' ? JSON.parse(row.wraps) : row.wraps);

/**
 * Envelope encryption of a subscription's values. Each subscription has a
 * data key of its own (AES-256, made on first use), stored wrapped by the
 * master key in `core_data_key`; values are AES-256-GCM under the data key as
 * `k1.<data key id>.<iv>.<tag>.<ciphertext>`, with the subscription id as
 * associated data, so a value copied into another subscription's row does
 * not open. Rotating the master key wraps the data keys again and leaves
 * every value as it is.
 *
 * seal and open may read or create the data key on a connection of their
 * own: call them before a transaction, not inside one (on the embedded
 * database a second connection waits for the transaction to end).
 */
export class Keyring {
  readonly #db: Database;
  readonly #master: MasterKeys;
  readonly #bySubscription = new Map<string, DataKey>();
  readonly #byId = new Map<string, DataKey>();

  constructor({ db, keys }: { db: Database; keys: MasterKeys }) {
    this.#db = db;
    this.#master = keys;
  }

  /** Id of the master key that wraps new data keys. */
  get masterKeyId(): string {
    return this.#master.current.id;
  }

  async seal(subscriptionId: string, plaintext: string): Promise<string> {
    const dataKey = this.#bySubscription.get(subscriptionId) ?? (await this.#dataKeyOf(subscriptionId));
    return `${PREFIX}${dataKey.id}.${gcmSeal(dataKey.key, plaintext, subscriptionId)}`;
  }

  /** The plaintext of a value sealed for this subscription; throws for any other value, never returning a wrong one. */
  async open(subscriptionId: string, sealed: string): Promise<string> {
    if (!sealed.startsWith(PREFIX)) throw new Error('Not a value sealed by the keyring');
    const dot = sealed.indexOf('.', PREFIX.length);
    const dataKeyId = sealed.slice(PREFIX.length, dot);
    const dataKey = this.#byId.get(dataKeyId) ?? (await this.#loadById(dataKeyId, subscriptionId));
    if (dataKey.subscriptionId !== subscriptionId) throw new Error('The value was sealed for another subscription');
    return gcmOpen(dataKey.key, sealed.slice(dot + 1), subscriptionId).toString('utf8');
  }

  /**
   * Wraps every data key that is not wrapped by the current master key alone
   * again, one row at a time, each changed only if no one changed it since it
   * was read. Nodes go on serving: a data key is the same whatever wraps it.
   * Passes repeat until one finds nothing to do, so a data key a node made
   * during a pass (behind its cursor) is not left under an old key.
   */
  async rewrapAll(): Promise<RewrapResult> {
    let rewrapped = 0;
    for (;;) {
      const pass = await this.#rewrapPass();
      rewrapped += pass.rewrapped;
      if (pass.rewrapped === 0) return { rewrapped, current: pass.current - rewrapped };
    }
  }

  /**
   * A subscription's data keys wrapped by `transferKey` instead of a master
   * key, for a tenant export (core/operator/tenant.ts): its sealed values
   * travel as they are, and only what opens them is wrapped for the trip.
   */
  async exportDataKeys(subscriptionId: string, transferKey: Buffer): Promise<{ id: string; wrapped: string }[]> {
    const rows = await this.#db.execute<DataKeyRow>('select id, subscription_id, wraps from core_data_key where subscription_id = ? order by id', [
      subscriptionId,
    ]);
    return rows.map((row) => ({ id: row.id, wrapped: gcmSeal(transferKey, this.#unwrap(row), wrapAad(row.id, subscriptionId)) }));
  }

  /** The rows of `core_data_key` for data keys exportDataKeys wrapped, now wrapped by this installation's master key. */
  importedDataKeys(subscriptionId: string, keys: readonly { id: string; wrapped: string }[], transferKey: Buffer): DataKeyRow[] {
    return keys.map(({ id, wrapped }) => {
      if (!UUID.test(id)) throw new Error(`Data key id ${id} is not a UUID`);
      const key = gcmOpen(transferKey, wrapped, wrapAad(id, subscriptionId));
      return { id, subscription_id: subscriptionId, wraps: this.#wrap(id, subscriptionId, key, [this.#master.current]) };
    });
  }

  async #rewrapPass(): Promise<RewrapResult> {
    const result: RewrapResult = { rewrapped: 0, current: 0 };
    let after = '00000000-0000-0000-0000-000000000000';
    for (;;) {
      const rows = await this.#db.execute<DataKeyRow>('select id, subscription_id, wraps from core_data_key where id > ? order by id limit 500', [after]);
      if (rows.length === 0) return result;
      for (const row of rows) {
        const wraps = wrapsOf(row);
        const ids = Object.keys(wraps);
        if (ids.length === 1 && ids[0] === this.#master.current.id) {
          result.current += 1;
          continue;
        }
        const key = this.#unwrap(row);
        const changed = await this.#db.execute(
          'update core_data_key set wraps = ?::jsonb, rewrapped_at = now() where id = ? and wraps = ?::jsonb returning id',
          [JSON.stringify(this.#wrap(row.id, row.subscription_id, key, [this.#master.current])), row.id, JSON.stringify(wraps)],
        );
        // Not changed: it changed since it was read, and the next pass looks at it again.
        if (changed.length === 1) result.rewrapped += 1;
      }
      after = rows.at(-1)!.id;
    }
  }

  async #dataKeyOf(subscriptionId: string): Promise<DataKey> {
    const [found] = await this.#db.execute<DataKeyRow>('select id, subscription_id, wraps from core_data_key where subscription_id = ?', [subscriptionId]);
    if (found) return this.#remember(found);
    const id = randomUUID();
    const key = randomBytes(32);
    // Wrapped under every configured key, so nodes not yet given a new master key still read it during a rotation.
    const wraps = this.#wrap(id, subscriptionId, key, [this.#master.current, ...this.#master.previous]);
    await this.#db.execute(
      'insert into core_data_key (id, subscription_id, wraps, created_at) values (?, ?, ?::jsonb, now()) on conflict (subscription_id) do nothing',
      [id, subscriptionId, JSON.stringify(wraps)],
    );
    // Another node may have made one first: use whichever was stored.
    const [stored] = await this.#db.execute<DataKeyRow>('select id, subscription_id, wraps from core_data_key where subscription_id = ?', [subscriptionId]);
    return this.#remember(stored!);
  }

  async #loadById(dataKeyId: string, subscriptionId: string): Promise<DataKey> {
    const [row] = UUID.test(dataKeyId)
      ? await this.#db.execute<DataKeyRow>('select id, subscription_id, wraps from core_data_key where id = ? and subscription_id = ?', [
          dataKeyId,
          subscriptionId,
        ])
      : [];
    if (!row) throw new Error('The value was sealed with a data key this subscription does not have');
    return this.#remember(row);
  }

  #remember(row: DataKeyRow): DataKey {
    if (this.#byId.size >= CACHE_LIMIT) {
      this.#byId.clear();
      this.#bySubscription.clear();
    }
    const dataKey: DataKey = { id: row.id, subscriptionId: row.subscription_id, key: this.#unwrap(row) };
    this.#byId.set(dataKey.id, dataKey);
    this.#bySubscription.set(dataKey.subscriptionId, dataKey);
    return dataKey;
  }

  #unwrap(row: DataKeyRow): Buffer {
    const wraps = wrapsOf(row);
    const master = [this.#master.current, ...this.#master.previous].find(({ id }) => wraps[id] !== undefined);
    if (!master) {
      throw new Error(`Data key ${row.id} is wrapped by master keys ${Object.keys(wraps).join(', ')}, none of them configured`);
    }
    return gcmOpen(master.key, wraps[master.id]!, wrapAad(row.id, row.subscription_id));
  }

  #wrap(id: string, subscriptionId: string, key: Buffer, masters: readonly MasterKey[]): Record<string, string> {
    return Object.fromEntries(masters.map((master) => [master.id, gcmSeal(master.key, key, wrapAad(id, subscriptionId))]));
  }
}
