import type { EntityManager } from '@mikro-orm/postgresql';
import type { SqlCondition } from '../records/json-filter.ts';
import type { Database } from '../db/orm.ts';
import { pgArray } from '../db/pg-array.ts';
import type { RowOf } from '../db/rows.ts';
import type { EmbeddingState } from './embedding-state.entity.ts';
import { vectorLiteral } from './vector-type.ts';
import * as v from 'valibot';
import { defineJob, type Job, type Jobs } from '../jobs/job-service.ts';
import { conflict } from '../base/errors.ts';
import type { RequestContext } from '../base/context.ts';
import type { AiCaller, AiClient } from './ai-client.ts';
import { hybridWeightOf, type AiCatalogue } from './catalogue.ts';

export type VectorColumn = 'embedding_a' | 'embedding_b';

/** A table whose rows carry an embedding of their text, in two columns so that the model can change without downtime. */
export interface EmbeddedTable {
  /** Its name (from the plugin's code, never from input). It has `subscription_id`, `id` (uuid, unique within a subscription) and the vector columns `embedding_a` and `embedding_b`. */
  table: string;
  /** A column that changes whenever the embedded text does (a hash of it): a vector is written only to the row it was made from. */
  hashColumn: string;
  /** The columns the embedded text is made of, and how it is made of them. */
  inputColumns: readonly string[];
  input(row: Record<string, string>): string;
  /** A condition rows needing a vector pass (withdrawn rows need none); every row when omitted. */
  live?: string;
  /** The name of the plugin's job made by `switchModelJob` for this table. */
  job: string;
  caller: AiCaller;
}

/** Which column answers, with which model, and the switch under way. */
export interface EmbeddingSlots {
  active: VectorColumn;
  inactive: VectorColumn;
  model: string;
  nextModel: string | null;
  inactiveDirty: boolean;
  switchStartedAt: string | null;
}

/** Where a change of embedding model stands, for statistics. */
export interface EmbeddingProgress {
  model: string;
  /** The switch under way: the rows (of the condition given) embedded with the next model so far, of all of them. */
  switch: { nextModel: string; embedded: number; total: number; startedAt: string | null } | null;
}

export interface SwitchOutcome {
  cleared: number;
  embedded: number;
  switched: boolean;
}

type StateRow = RowOf<EmbeddingState, 'activeSlot' | 'activeModel' | 'nextModel' | 'inactiveDirty' | 'switchStartedAt'>;

/** Rows embedded per call to the model, and rows a switch empties per statement. */
const EMBED_BATCH = 128;
const CLEAR_BATCH = 1000;
/** How long the switch's lease lasts without renewal. */
const LEASE_SECONDS = 120;
/** Times a write is tried again when the model changed while its vectors were made. */
const WRITE_ATTEMPTS = 3;
const STATE_COLUMNS = 'active_slot, active_model, next_model, inactive_dirty, switch_started_at';

const columnOf = (slot: 'a' | 'b'): VectorColumn => `embedding_${slot}`;
const slotOf = (column: VectorColumn): 'a' | 'b' => (column === 'embedding_a' ? 'a' : 'b');
const otherSlot = (slot: 'a' | 'b'): 'a' | 'b' => (slot === 'a' ? 'b' : 'a');

function slotsOf(row: StateRow): EmbeddingSlots {
  return {
    active: columnOf(row.active_slot),
    inactive: columnOf(otherSlot(row.active_slot)),
    model: row.active_model,
    nextModel: row.next_model,
    inactiveDirty: row.inactive_dirty,
    switchStartedAt: row.switch_started_at === null ? null : new Date(row.switch_started_at).toISOString(),
  };
}

const sameSlots = (a: EmbeddingSlots, b: EmbeddingSlots) => a.active === b.active && a.model === b.model;

/**
 * The embeddings of a table, kept in two vector columns so that changing
 * the embedding model costs no downtime: searches and writes use the active
 * column with its model, while the plugin's switch job fills the other one
 * with the newly configured model's vectors (tenant by tenant, so each pays
 * its own embedding calls) and then makes it the active one in one
 * transaction; the column it replaces is emptied after. The switch holds a
 * lease, so one node runs it at a time, and resumes where it stopped.
 *
 * Writes of vectors go through `write` (or `embedAndWrite`): it holds a
 * shared advisory lock that the cut-over takes exclusively, so a vector made
 * with the model that was active is never written after another became
 * active (the write is then done again with the new model).
 */
export class EmbeddingColumns {
  readonly #db: Database;
  readonly #ai: AiClient;
  readonly #catalogue: AiCatalogue;
  readonly #jobs: Jobs;
  readonly #table: EmbeddedTable;
  readonly #live: string;

  constructor({ db, ai, aiCatalogue, jobs }: { db: Database; ai: AiClient; aiCatalogue: AiCatalogue; jobs: Jobs }, table: EmbeddedTable) {
    this.#db = db;
    this.#ai = ai;
    this.#catalogue = aiCatalogue;
    this.#jobs = jobs;
    this.#table = table;
    this.#live = table.live ?? 'true';
  }

  /**
   * Makes the state row on first start (the configured model active), and
   * starts a switch when the configured model is another one. Call it from
   * the plugin's start hook.
   */
  async open(): Promise<void> {
    const em = this.#db.forkEm(null);
    const configured = this.#catalogue.defaults.embedding!;
    await em.execute(
      `insert into core_embedding_state (table_name, active_slot, active_model, inactive_dirty) values (?, 'a', ?, false) on conflict (table_name) do nothing`,
      [this.#table.table, configured],
    );
    const state = await this.state(em);
    const wanted = state.model === configured ? null : configured;
    if (wanted !== state.nextModel) {
      // A new target (or none, when the configuration went back): what the other column holds is of no use.
      await em.execute('update core_embedding_state set next_model = ?, inactive_dirty = true, switch_started_at = ? where table_name = ?', [
        wanted,
        wanted ? new Date() : null,
        this.#table.table,
      ]);
    }
    if (wanted !== null || state.inactiveDirty || wanted !== state.nextModel) await this.#jobs.enqueue(this.#table.job, {}, { key: 'switch' });
  }

  /** How much the ranking by the model of `slots` counts in hybrid search (the catalogue's `hybridWeight`, else 1). */
  hybridWeight(slots: EmbeddingSlots): number {
    return hybridWeightOf(this.#catalogue, slots.model);
  }

  async state(em: EntityManager): Promise<EmbeddingSlots> {
    const [row] = await em.execute<StateRow[]>(`select ${STATE_COLUMNS} from core_embedding_state where table_name = ?`, [this.#table.table]);
    if (!row) throw new Error(`No embedding state for ${this.#table.table}: open() was not called`);
    return slotsOf(row);
  }

  /** Embeds texts with the active model of `slots`. */
  async embed(ctx: RequestContext, slots: EmbeddingSlots, texts: string[]): Promise<number[][]> {
    return (await this.#ai.embed(ctx, texts, { model: slots.model, caller: this.#table.caller })).vectors;
  }

  /**
   * Runs `write` in a transaction, if the active column and model are still
   * those of `slots` (the vectors it writes were made with them); null when
   * they changed. No cut-over can happen until the transaction ends.
   */
  async write<T>(em: EntityManager, slots: EmbeddingSlots, write: (tx: EntityManager) => Promise<T>): Promise<{ value: T } | null> {
    return em.transactional(async (tx) => {
      await tx.execute('select pg_advisory_xact_lock_shared(hashtextextended(?, 0))', [this.#lockName()]);
      if (!sameSlots(await this.state(tx), slots)) return null;
      return { value: await write(tx) };
    });
  }

  /** Embeds texts with the active model and writes the vectors with `write` (see `write`); again with the new model if it changed meanwhile. */
  async embedAndWrite<T>(
    ctx: RequestContext & { em: EntityManager },
    texts: string[],
    write: (tx: EntityManager, slots: EmbeddingSlots, vectors: number[][]) => Promise<T>,
  ): Promise<T> {
    for (let attempt = 1; ; attempt++) {
      const slots = await this.state(ctx.em);
      const vectors = await this.embed(ctx, slots, texts);
      const written = await this.write(ctx.em, slots, (tx) => write(tx, slots, vectors));
      if (written) return written.value;
      if (attempt === WRITE_ATTEMPTS) throw conflict('The embedding model changed while this call ran; try it again');
    }
  }

  /** The active model, and the progress of a switch under way over the rows of `where`. */
  async progress(em: EntityManager, where: SqlCondition): Promise<EmbeddingProgress> {
    const slots = await this.state(em);
    if (!slots.nextModel) return { model: slots.model, switch: null };
    const [counts] = await em.execute<{ total: string; embedded: string }[]>(
      `select count(*) as total, count(${slots.inactive}) as embedded from ${this.#table.table} where (${where.sql}) and ${this.#live}`,
      where.params,
    );
    return {
      model: slots.model,
      switch: {
        nextModel: slots.nextModel,
        embedded: slots.inactiveDirty ? 0 : Number(counts!.embedded),
        total: Number(counts!.total),
        startedAt: slots.switchStartedAt,
      },
    };
  }

  /**
   * The switch job: empties the inactive column if it is stale, fills it
   * with the next model's vectors, and when every row has one, cuts over;
   * one more pass then empties the column replaced. Does nothing while
   * another node holds the lease.
   */
  async switchModel(ctx: RequestContext): Promise<SwitchOutcome> {
    const em = this.#db.forkEm(null);
    const outcome: SwitchOutcome = { cleared: 0, embedded: 0, switched: false };
    const name = this.#table.table;
    const lease = `lease_until = now() + interval '${LEASE_SECONDS} seconds'`;
    const [leased] = await em.execute(
      `update core_embedding_state set ${lease} where table_name = ? and (lease_until is null or lease_until < now()) returning table_name`,
      [name],
    );
    if (!leased) return outcome;
    const renew = () => em.execute(`update core_embedding_state set ${lease} where table_name = ?`, [name]);
    try {
      for (let pass = 0; pass < 3; pass++) {
        const slots = await this.state(em);
        if (slots.inactiveDirty) {
          outcome.cleared += await this.#clear(em, slots, renew);
          await em.execute(
            'update core_embedding_state set inactive_dirty = false where table_name = ? and active_slot = ? and next_model is not distinct from ?',
            [name, slotOf(slots.active), slots.nextModel],
          );
          continue;
        }
        if (!slots.nextModel) break;
        outcome.embedded += await this.#fill(ctx, em, slots, renew);
        outcome.switched = await this.#cutOver(em, slots);
        if (!outcome.switched) break;
      }
    } finally {
      await em.execute('update core_embedding_state set lease_until = null where table_name = ?', [name]);
    }
    return outcome;
  }

  /** Empties the inactive column, in batches along the primary key. */
  async #clear(em: EntityManager, slots: EmbeddingSlots, renew: () => Promise<unknown>): Promise<number> {
    const { table } = this.#table;
    let cleared = 0;
    let after = '00000000-0000-0000-0000-000000000000';
    for (;;) {
      const rows = await em.execute<{ id: string }[]>(
        `update ${table} set ${slots.inactive} = null where id in (select id from ${table} where id > ? and ${slots.inactive} is not null order by id limit ${CLEAR_BATCH}) returning id`,
        [after],
      );
      cleared += rows.length;
      if (rows.length < CLEAR_BATCH) return cleared;
      after = rows.reduce((last, row) => (row.id > last ? row.id : last), after);
      await renew();
    }
  }

  /** Embeds, with the next model, every live row whose inactive column is empty, a tenant's batch at a time. */
  async #fill(ctx: RequestContext, em: EntityManager, slots: EmbeddingSlots, renew: () => Promise<unknown>): Promise<number> {
    const { table, hashColumn, inputColumns } = this.#table;
    const waiting = `${slots.inactive} is null and ${this.#live}`;
    let embedded = 0;
    for (;;) {
      const [first] = await em.execute<{ subscription_id: string }[]>(`select subscription_id from ${table} where ${waiting} limit 1`);
      if (!first) return embedded;
      const rows = await em.execute<Record<string, string>[]>(
        `select id, ${hashColumn} as hash, ${inputColumns.join(', ')} from ${table} where subscription_id = ? and ${waiting} limit ${EMBED_BATCH}`,
        [first.subscription_id],
      );
      const tenant = { ...ctx, subscriptionId: first.subscription_id, em } as RequestContext;
      const { vectors } = await this.#ai.embed(
        tenant,
        rows.map((row) => this.#table.input(row)),
        { model: slots.nextModel!, caller: this.#table.caller },
      );
      const written = await em.execute<{ id: string }[]>(
        `update ${table} set ${slots.inactive} = v.embedding::vector from unnest(?::uuid[], ?::text[], ?::text[]) as v(id, hash, embedding)
         where ${table}.subscription_id = ? and ${table}.id = v.id and ${table}.${hashColumn} = v.hash
           and exists (select 1 from core_embedding_state where table_name = ? and active_slot = ? and next_model = ? and not inactive_dirty)
         returning ${table}.id`,
        [
          pgArray(rows.map((row) => row.id!)),
          pgArray(rows.map((row) => row.hash!)),
          pgArray(vectors.map((vector) => vectorLiteral(vector))),
          first.subscription_id,
          table,
          slotOf(slots.active),
          slots.nextModel,
        ],
      );
      if (written.length === 0) {
        // The switch was replaced or abandoned meanwhile: stop, the next run starts from the new state.
        const now = await this.state(em);
        if (now.nextModel !== slots.nextModel || !sameSlots(now, slots) || now.inactiveDirty) return embedded;
      }
      embedded += written.length;
      await renew();
    }
  }

  /** Makes the filled column the active one if no live row lacks a vector of the next model; false otherwise. */
  async #cutOver(em: EntityManager, slots: EmbeddingSlots): Promise<boolean> {
    const { table } = this.#table;
    return em.transactional(async (tx) => {
      // Waits for writes of the active model's vectors under way (they hold this lock shared), and keeps new ones out until the switch commits.
      await tx.execute('select pg_advisory_xact_lock(hashtextextended(?, 0))', [this.#lockName()]);
      const [locked] = await tx.execute<StateRow[]>(`select ${STATE_COLUMNS} from core_embedding_state where table_name = ? for update`, [table]);
      const now = locked && slotsOf(locked);
      if (!now || !sameSlots(now, slots) || now.nextModel !== slots.nextModel || now.inactiveDirty) return false;
      const [missing] = await tx.execute(`select id from ${table} where ${slots.inactive} is null and ${this.#live} limit 1`);
      if (missing) return false;
      await tx.execute(
        'update core_embedding_state set active_slot = ?, active_model = next_model, next_model = null, inactive_dirty = true, switched_at = now() where table_name = ?',
        [slotOf(slots.inactive), table],
      );
      return true;
    });
  }

  #lockName(): string {
    return `core_embedding_state:${this.#table.table}`;
  }
}

/**
 * The job that runs a table's switch, for the plugin's `jobs` under the name
 * its EmbeddedTable gives: one at a time, and every minute as well, so that
 * a switch stopped by a restart resumes.
 */
export function switchModelJob<D>(columns: (deps: D) => EmbeddingColumns, what: string): Job {
  return defineJob({
    describe: `Moves ${what} to the configured embedding model: fills the other embedding column, then cuts over.`,
    data: v.object({}),
    handler: ({ ctx, deps }: { ctx: RequestContext; deps: D }) => columns(deps).switchModel(ctx),
    schedule: '* * * * *',
    concurrency: 1,
    timeoutSeconds: 3600,
  });
}
