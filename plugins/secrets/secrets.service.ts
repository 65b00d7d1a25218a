import { randomUUID } from 'node:crypto';
import {
  conflict,
  defineRecord,
  notFound,
  preparedRead,
  type AuditLog,
  type AuditRecord,
  type AuthenticatedContext,
  type Database,
  type EntityManager,
  type EventBus,
  type Keyring,
  type ListEnvelope,
  type ListQuery,
  type RowOf,
} from 'rpc-service/plugin';
import * as v from 'valibot';
import { Secret } from './secret.entity.ts';

/** A secret's definition, never its value; what lists filter and sort by. */
const SECRET = defineRecord(Secret, { hide: ['subscriptionId', 'id', 'value', 'createdAt', 'updatedAt'] });
/** The record's `_id` is `zone:key`, as SecretsRpc addresses a secret, not its row's id. */
export const SECRET_RECORD = v.strictObject({ _id: v.string(), ...SECRET.entries });
export type SecretRecord = v.InferOutput<typeof SECRET_RECORD>;
type SecretField = keyof typeof SECRET.entries;
/** The record's columns (zone, key, description), in the entity's order: what lists load, filter and sort by. */
export const SECRET_FIELDS = Object.keys(SECRET.entries) as SecretField[];

export interface SecretListQuery {
  filter: Partial<Omit<SecretRecord, '_id'>>;
  sort: Record<string, 'asc' | 'desc'>;
  page: number;
  pageSize: number;
}

/** The audit kind of both secret groups, and the event this group sends when a secret changes. */
export const AUDIT_KIND = 'secret';
export const SECRET_CHANGED = 'secret.changed';
const GROUP = 'SecretsRpc';

export const secretId = (zone: string, key: string): string => `${zone}:${key}`;

const toRecord = (secret: Pick<Secret, SecretField>): SecretRecord => ({ _id: secretId(secret.zone, secret.key), ...SECRET.toRecord(secret) });

/** A secret's sealed value: read on every SecretsRpc.getSecretValue, so prepared once per connection. */
const SEALED_VALUE = preparedRead('secrets_sealed_value', 'select value from secrets where subscription_id = $1 and zone = $2 and key = $3');

/** `%`, `_` and `\` match themselves inside an ILIKE pattern. */
const contains = (text: string): string => `%${text.replace(/[\\%_]/g, (char) => `\\${char}`)}%`;

/** Zone-based secrets: definitions listed freely, values sealed by the keyring and read by admins only, every read and change audited. */
export class SecretsService {
  readonly #keyring: Keyring;
  readonly #audit: AuditLog;
  readonly #bus: EventBus;
  readonly #db: Database;

  constructor({ keyring, audit, bus, db }: { keyring: Keyring; audit: AuditLog; bus: EventBus; db: Database }) {
    this.#db = db;
    this.#keyring = keyring;
    this.#audit = audit;
    this.#bus = bus;
  }

  async getData(ctx: AuthenticatedContext, { filter, sort, page, pageSize }: SecretListQuery): Promise<ListEnvelope<SecretRecord>> {
    const where: Record<string, unknown> = {};
    if (filter.zone !== undefined) where.zone = filter.zone;
    if (filter.key !== undefined) where.key = { $ilike: contains(filter.key) };
    if (filter.description !== undefined) where.description = { $ilike: contains(filter.description) };
    const [secrets, totalCount] = await ctx.em.findAndCount(Secret, where, {
      fields: SECRET_FIELDS,
      orderBy: { ...sort, zone: sort.zone ?? 'asc', key: sort.key ?? 'asc' },
      limit: pageSize,
      offset: (page - 1) * pageSize,
    });
    return { data: secrets.map(toRecord), totalCount };
  }

  async create(ctx: AuthenticatedContext, input: { zone: string; key: string; value: string; description: string }): Promise<SecretRecord> {
    const id = secretId(input.zone, input.key);
    if (await ctx.em.count(Secret, { zone: input.zone, key: input.key })) throw conflict(`Secret ${id} already exists`);
    const value = await this.#keyring.seal(ctx.subscriptionId, input.value);
    const secret = await ctx.em.fork().transactional(async (em) => {
      const created = em.create(Secret, {
        id: randomUUID(),
        subscriptionId: ctx.subscriptionId,
        zone: input.zone,
        key: input.key,
        description: input.description,
        value,
        createdAt: new Date(),
        updatedAt: new Date(),
      });
      await em.flush();
      await this.#audit.record(em, ctx, this.#action('create', id));
      return created;
    });
    await this.#changed(ctx, 'created', secret);
    return toRecord(secret);
  }

  /** An omitted or empty value leaves the stored one as it is. */
  async update(ctx: AuthenticatedContext, id: string, changes: { value?: string; description?: string }): Promise<SecretRecord> {
    await this.#find(ctx.em, id);
    const value = changes.value ? await this.#keyring.seal(ctx.subscriptionId, changes.value) : undefined;
    const secret = await ctx.em.fork().transactional(async (em) => {
      const secret = await this.#find(em, id);
      if (value !== undefined) secret.value = value;
      if (changes.description !== undefined) secret.description = changes.description;
      await em.flush();
      await this.#audit.record(em, ctx, this.#action('update', id));
      return secret;
    });
    await this.#changed(ctx, 'updated', secret);
    return toRecord(secret);
  }

  async delete(ctx: AuthenticatedContext, id: string): Promise<{ success: true }> {
    const secret = await ctx.em.fork().transactional(async (em) => {
      const secret = await this.#find(em, id);
      await em.remove(secret).flush();
      await this.#audit.record(em, ctx, this.#action('delete', id));
      return secret;
    });
    await this.#changed(ctx, 'deleted', secret);
    return { success: true };
  }

  /** The value, returned only once its read is in the audit log. */
  async getSecretValue(ctx: AuthenticatedContext, zone: string, key: string): Promise<{ value: string }> {
    const id = secretId(zone, key);
    const [secret] = await this.#db.read<RowOf<Secret, 'value'>>(SEALED_VALUE, [ctx.subscriptionId, zone, key]);
    if (!secret) throw notFound(`Secret ${id} not found`);
    const value = await this.#keyring.open(ctx.subscriptionId, secret.value);
    await this.#audit.recordRead(ctx, this.#action('read', id));
    return { value };
  }

  /** Reads and changes of the secrets of both groups. */
  getAuditLog(ctx: AuthenticatedContext, query: ListQuery): Promise<ListEnvelope<AuditRecord>> {
    return this.#audit.list(ctx, AUDIT_KIND, query);
  }

  async #find(em: EntityManager, id: string): Promise<Secret> {
    const colon = id.indexOf(':');
    const secret = await em.findOne(Secret, { zone: id.slice(0, colon), key: id.slice(colon + 1) });
    if (!secret) throw notFound(`Secret ${id} not found`);
    return secret;
  }

  #action(action: string, id: string) {
    return { kind: AUDIT_KIND, group: GROUP, action, targetId: id, target: id };
  }

  #changed(ctx: AuthenticatedContext, action: string, secret: Secret): Promise<void> {
    return this.#bus.publish({
      name: SECRET_CHANGED,
      subscriptionId: ctx.subscriptionId,
      payload: { action, ...toRecord(secret) },
    });
  }
}
