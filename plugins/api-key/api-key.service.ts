import { randomBytes, randomUUID } from 'node:crypto';
import {
  ACROSS_TENANTS,
  digestsEqual,
  forbidden,
  listOf,
  notFound,
  preparedRead,
  randomToken,
  rowTimestamp,
  sha256,
  sha256Hex,
  unauthenticated,
  wireTimestamp,
  type AuthenticatedContext,
  type CredentialCache,
  type Credentials,
  type CredentialVerifier,
  type Database,
  type EntityManager,
  type Extensions,
  type Keyring,
  type ListEnvelope,
  type PluginServices,
  type Principal,
  type SecretBox,
} from 'rpc-service/plugin';
import * as v from 'valibot';
import { ApiKey } from './api-key.entity.ts';
import type { ContributedFields } from './record-fields.ts';

/** Keys look like `ak3f9c1e0b7d24a6_<43 base64url characters>`: a lookup prefix and a 32-byte secret. */
const KEY_FORMAT = /^(ak[0-9a-f]{14})_([A-Za-z0-9_-]{43,})$/;

/**
 * A key as ApiKeyRpc returns it; the webhook fields are ApiManagementRpc's (`api-key.recordFields`), null without it.
 * Written by hand: lists read raw rows (LIST_KEYS) and merge fields another plugin contributes, so it is not one entity's record.
 */
export const API_KEY_RECORD = v.strictObject({
  _id: v.string(),
  subscriptionId: v.string(),
  userId: v.string(),
  prefix: v.string(),
  description: v.string(),
  isEnabled: v.boolean(),
  initialContext: v.nullable(v.record(v.string(), v.unknown())),
  scopes: v.nullable(v.array(v.string())),
  readOnly: v.boolean(),
  rateLimitPerMinute: v.nullable(v.number()),
  webhookUrl: v.nullable(v.string()),
  webhookSecret: v.nullable(v.string()),
  // The contributing plugin's vocabulary (ApiManagementRpc: verified, unreachable, disabled).
  webhookStatus: v.nullable(v.string()),
  lastTestedAt: v.nullable(wireTimestamp),
  createdAt: wireTimestamp,
  updatedAt: wireTimestamp,
});
export type ApiKeyRecord = v.InferOutput<typeof API_KEY_RECORD>;

/** The create answer: the record, its stored key material and, this once, the full key. */
export const CREATED_API_KEY = v.strictObject({ ...API_KEY_RECORD.entries, keyHash: v.string(), encryptedKey: v.string(), fullKey: v.string() });
export type CreatedApiKey = v.InferOutput<typeof CREATED_API_KEY>;

/** A key as other plugins see it: which keys a subscription has, whose, and whether they work. */
export interface KeySummary {
  id: string;
  userId: string;
  description: string;
  isEnabled: boolean;
}

/** What a key may call, within its owner's role (README.md here, "Scopes and limits"). */
export interface KeyLimits {
  /** undefined leaves it (on update); null: every operation. */
  scopes?: string[] | null;
  readOnly?: boolean;
  /** undefined leaves it (on update); null: no limit. */
  rateLimitPerMinute?: number | null;
}

export interface ApiKeyChanges extends KeyLimits {
  description?: string;
  /** undefined leaves it; null clears it. */
  initialContext?: Record<string, unknown> | null;
  isEnabled?: boolean;
}

interface Deps {
  db: Database;
  credentials: Credentials;
  keyring: Keyring;
  secretBox: SecretBox;
  userService: PluginServices['userService'];
  extensions: Extensions;
}

/**
 * What a record is made from: an ApiKey entity, or a row of LIST_KEYS, whose
 * timestamps come as PostgreSQL's text from the ORM's PostgreSQL connection
 * (it keeps them as text) and as Dates from PGlite.
 */
type RecordSource = Omit<ApiKey, 'keyHash' | 'encryptedKey' | 'createdAt' | 'updatedAt'> & {
  createdAt: Date | string;
  updatedAt: Date | string;
};

const isoText = (value: Date | string): string => rowTimestamp(value).toISOString();

export function toApiKeyRecord(key: RecordSource, contributed: ContributedFields = {}): ApiKeyRecord {
  const updatedAt = isoText(key.updatedAt);
  return {
    _id: key.id,
    subscriptionId: key.subscriptionId,
    userId: key.userId,
    prefix: key.prefix,
    description: key.description,
    isEnabled: key.isEnabled,
    initialContext: key.initialContext ?? null,
    scopes: key.scopes ?? null,
    readOnly: key.readOnly ?? false,
    rateLimitPerMinute: key.rateLimitPerMinute ?? null,
    webhookUrl: contributed.webhookUrl ?? null,
    webhookSecret: contributed.webhookSecret ?? null,
    webhookStatus: contributed.webhookStatus ?? null,
    lastTestedAt: contributed.lastTestedAt ?? null,
    createdAt: isoText(key.createdAt),
    // ISO 8601 texts in UTC compare as their times do.
    updatedAt: contributed.updatedAt && contributed.updatedAt > updatedAt ? contributed.updatedAt : updatedAt,
  };
}

/**
 * The query of getData, written once. em.find would build the query and
 * hydrate managed entities on every call, which costs several times the query
 * itself for a read-only list; this is prepared once per connection and runs
 * with only its values sent (the benchmark's direct reader sends the same text).
 * It does not go through the ORM's tenant filter, so it names the subscription
 * itself: the first parameter.
 */
export const LIST_KEYS = preparedRead(
  'api_key_list',
  'select id, subscription_id as "subscriptionId", user_id as "userId", prefix, description, is_enabled as "isEnabled", ' +
    'initial_context as "initialContext", scopes, read_only as "readOnly", rate_limit_per_minute as "rateLimitPerMinute", ' +
    'created_at as "createdAt", updated_at as "updatedAt" ' +
    'from api_key where subscription_id = $1 and user_id = $2 order by created_at desc',
);

/** API keys of the calling user, and the verifier the core authenticates `X-API-Key` with. */
export class ApiKeyService implements CredentialVerifier {
  readonly #db: Database;
  readonly #credentials: Credentials;
  readonly #keyring: Keyring;
  readonly #secretBox: SecretBox;
  readonly #users: Deps['userService'];
  readonly #extensions: Extensions;
  readonly #cache: CredentialCache;
  /**
   * Prefixes that matched no key, remembered briefly so a flood of made-up
   * keys does not turn into a flood of queries. Prefixes are random, so a new
   * key never carries one of them.
   */
  readonly #unknownPrefixes = new Map<string, number>();

  constructor({ db, credentials, keyring, secretBox, userService, extensions }: Deps) {
    this.#db = db;
    this.#credentials = credentials;
    this.#keyring = keyring;
    this.#secretBox = secretBox;
    this.#users = userService;
    this.#extensions = extensions;
    this.#cache = credentials.createCache();
  }

  async getData(ctx: AuthenticatedContext): Promise<ListEnvelope<ApiKeyRecord>> {
    const rows = await this.#db.read<RecordSource>(LIST_KEYS, [ctx.subscriptionId, ctx.userId]);
    return listOf(await this.#records(ctx.subscriptionId, rows));
  }

  /** The records of some keys of a subscription, with the fields other plugins keep for them. */
  async #records(subscriptionId: string, keys: readonly RecordSource[]): Promise<ApiKeyRecord[]> {
    const contributions = keys.length === 0 ? [] : this.#extensions.get('api-key.recordFields');
    const ids = keys.map((key) => key.id);
    const contributed = await Promise.all(contributions.map(({ value }) => value.fields(subscriptionId, ids)));
    return keys.map((key) => toApiKeyRecord(key, Object.assign({}, ...contributed.map((fields) => fields.get(key.id)))));
  }

  /** The subscription's keys among these ids, oldest first. */
  async keysById(subscriptionId: string, ids: readonly string[]): Promise<KeySummary[]> {
    if (ids.length === 0) return [];
    const keys = await this.#db
      .forkEm(subscriptionId)
      .find(ApiKey, { id: { $in: [...ids] } }, { fields: ['id', 'userId', 'description', 'isEnabled'], orderBy: { createdAt: 'asc', id: 'asc' } });
    return keys.map((key) => ({ id: key.id, userId: key.userId, description: key.description, isEnabled: key.isEnabled }));
  }

  /**
   * The principals these keys of a subscription stand for now, as
   * authenticating with them would give (enabled keys of active users, their
   * owner's role and the key's limits), by key id; what a key's webhook is
   * delivered as.
   */
  async principalsOf(subscriptionId: string, ids: readonly string[]): Promise<Map<string, Principal>> {
    const principals = new Map<string, Principal>();
    if (ids.length === 0) return principals;
    const keys = await this.#db.forkEm(subscriptionId).find(ApiKey, { id: { $in: [...ids] }, isEnabled: true });
    for (const key of keys) {
      const principal = await this.#principalOf(key);
      if (principal) principals.set(key.id, principal);
    }
    return principals;
  }

  /** The principal of an enabled key: null when its user is gone or deactivated. */
  async #principalOf(key: ApiKey): Promise<Principal | null> {
    const holder = await this.#users.credentialHolder(key.subscriptionId, key.userId);
    if (!holder?.isActive) return null;
    return {
      subscriptionId: key.subscriptionId,
      userId: key.userId,
      role: holder.role,
      apiKeyId: key.id,
      sessionId: null,
      initialContext: key.initialContext ?? null,
      ...limitsOf(key),
    };
  }

  async create(ctx: AuthenticatedContext, input: { description: string; initialContext: Record<string, unknown> | null } & KeyLimits): Promise<CreatedApiKey> {
    await this.#withinCaller(ctx, { scopes: input.scopes ?? null, readOnly: input.readOnly ?? false, rateLimitPerMinute: input.rateLimitPerMinute ?? null });
    const prefix = `ak${randomBytes(7).toString('hex')}`;
    const fullKey = `${prefix}_${randomToken(32)}`;
    const key = ctx.em.create(ApiKey, {
      id: randomUUID(),
      subscriptionId: ctx.subscriptionId,
      userId: ctx.userId,
      prefix,
      keyHash: sha256Hex(fullKey),
      encryptedKey: await this.#keyring.seal(ctx.subscriptionId, fullKey),
      description: input.description,
      isEnabled: true,
      initialContext: input.initialContext,
      scopes: input.scopes ?? null,
      readOnly: input.readOnly ?? false,
      rateLimitPerMinute: input.rateLimitPerMinute ?? null,
      createdAt: new Date(),
      updatedAt: new Date(),
    });
    await ctx.em.flush();
    return { ...toApiKeyRecord(key), keyHash: key.keyHash, encryptedKey: key.encryptedKey, fullKey };
  }

  /**
   * Keys sealed before the keyring were sealed by the master key itself,
   * which a master-key rotation would leave unreadable: seal them again under
   * their subscription's data key. Each row changes only if it is as read.
   */
  async resealLegacy(): Promise<number> {
    const rows = await this.#db.execute<{ id: string; subscription_id: string; encrypted_key: string }>(
      `select id, subscription_id, encrypted_key from api_key where encrypted_key not like 'k1.%'`,
    );
    for (const row of rows) {
      await this.#db.execute('update api_key set encrypted_key = ? where subscription_id = ? and id = ? and encrypted_key = ?', [
        await this.#keyring.seal(row.subscription_id, this.#secretBox.decrypt(row.encrypted_key)),
        row.subscription_id,
        row.id,
        row.encrypted_key,
      ]);
    }
    return rows.length;
  }

  async update(ctx: AuthenticatedContext, id: string, changes: ApiKeyChanges): Promise<ApiKeyRecord> {
    const key = await this.#own(ctx, id);
    // The key as it would be after the change: a key may leave or make another only within itself.
    await this.#withinCaller(ctx, {
      scopes: changes.scopes !== undefined ? changes.scopes : (key.scopes ?? null),
      readOnly: changes.readOnly ?? key.readOnly,
      rateLimitPerMinute: changes.rateLimitPerMinute !== undefined ? changes.rateLimitPerMinute : (key.rateLimitPerMinute ?? null),
    });
    if (changes.description !== undefined) key.description = changes.description;
    if (changes.initialContext !== undefined) key.initialContext = changes.initialContext;
    if (changes.isEnabled !== undefined) key.isEnabled = changes.isEnabled;
    if (changes.scopes !== undefined) key.scopes = changes.scopes;
    if (changes.readOnly !== undefined) key.readOnly = changes.readOnly;
    if (changes.rateLimitPerMinute !== undefined) key.rateLimitPerMinute = changes.rateLimitPerMinute;
    await ctx.em.flush();
    await this.#credentials.changed({ apiKeyId: key.id });
    const [record] = await this.#records(ctx.subscriptionId, [key]);
    return record!;
  }

  async delete(ctx: AuthenticatedContext, id: string): Promise<{ success: true }> {
    const key = await this.#own(ctx, id);
    await ctx.em.remove(key).flush();
    await this.#credentials.changed({ apiKeyId: key.id });
    return { success: true };
  }

  /**
   * Deletes every key of a user inside `em`'s transaction (the user's removal,
   * or their account claimed by the owner of its address: `auth.lifecycle`);
   * their webhooks are then ignored (plugins/api-management/README.md). The
   * auth plugin announces the user's credentials changed once it commits, which
   * drops the keys from every node's cache.
   */
  async removeAllOf(em: EntityManager, userId: string): Promise<void> {
    await em.nativeDelete(ApiKey, { userId });
  }

  /**
   * A credential never grants or lifts beyond itself: called with an API key
   * (or an app's access token, or by a stored action acting with limits), the
   * key made or left by this call must be within the caller's own limits
   * (scopes they cover, read-only if they are, a rate limit no higher).
   * Sessions, and keys without limits, are bounded by the role alone.
   */
  async #withinCaller(ctx: AuthenticatedContext, result: Required<KeyLimits>): Promise<void> {
    // A key made by an app would outlive the app's revocation (plugins/oauth-server/README.md).
    if (ctx.grantId !== null) throw forbidden('An app (an OAuth access token) may not make or change API keys: they would outlive its revocation');
    const own = ctx.limits;
    if (!own) return;
    const credential = ctx.apiKeyId === null ? 'This caller' : 'This API key';
    if (own.scopes) {
      const covered = (scope: string) => own.scopes!.includes(scope) || own.scopes!.includes(scope.split('.')[0]!);
      const wider = result.scopes === null ? ['every group'] : result.scopes.filter((scope) => !covered(scope));
      if (wider.length > 0) {
        throw forbidden(`${credential} may not grant beyond its own scopes (${own.scopes.join(', ')}): ${wider.join(', ')} is wider; give scopes within them`);
      }
    }
    if (own.readOnly && !result.readOnly) throw forbidden(`${credential} is read-only: a key it makes or changes must be read-only too (readOnly: true)`);
    if (own.perMinute !== null && (result.rateLimitPerMinute === null || result.rateLimitPerMinute > own.perMinute)) {
      throw forbidden(`${credential} is limited to ${own.perMinute} calls a minute: a key it makes or changes must have a rateLimitPerMinute of at most that`);
    }
  }

  async #own(ctx: AuthenticatedContext, id: string): Promise<ApiKey> {
    const key = await ctx.em.findOne(ApiKey, { id, userId: ctx.userId });
    if (!key) throw notFound(`API key ${id} not found`);
    return key;
  }

  /**
   * The principal of a key already verified and cached, without a database
   * round trip; undefined when it must be read. Throws for anything invalid.
   */
  cached(presented: string): Principal | undefined {
    const prefix = prefixOf(presented);
    const entry = this.#cache.get(prefix);
    if (!entry) {
      const unknownUntil = this.#unknownPrefixes.get(prefix);
      if (unknownUntil !== undefined && unknownUntil > Date.now()) throw unauthenticated('Invalid API key');
      return undefined;
    }
    if (!digestsEqual(sha256(presented), entry.secretHash!)) throw unauthenticated('Invalid API key');
    return entry.principal;
  }

  /** The principal an `X-API-Key` value stands for; UNAUTHENTICATED for anything not currently valid. */
  async authenticate(presented: string): Promise<Principal> {
    return this.cached(presented) ?? this.#load(presented);
  }

  async #load(presented: string): Promise<Principal> {
    const prefix = prefixOf(presented);
    const readAt = this.#cache.generation;
    const key = await this.#db.forkEm(null).findOne(ApiKey, { prefix }, ACROSS_TENANTS);
    if (!key) {
      this.#rememberUnknown(prefix);
      throw unauthenticated('Invalid API key');
    }
    const storedHash = Buffer.from(key.keyHash, 'hex');
    if (!digestsEqual(sha256(presented), storedHash)) throw unauthenticated('Invalid API key');
    if (!key.isEnabled) throw unauthenticated('API key is disabled');
    const principal = await this.#principalOf(key);
    if (!principal) throw unauthenticated('The user of this API key is gone or deactivated');
    this.#cache.set(prefix, { principal, secretHash: storedHash, expiresAt: null, lastSeenAt: null }, readAt);
    return principal;
  }

  #rememberUnknown(prefix: string): void {
    if (this.#unknownPrefixes.size >= UNKNOWN_PREFIX_LIMIT) this.#unknownPrefixes.clear();
    this.#unknownPrefixes.set(prefix, Date.now() + UNKNOWN_PREFIX_TTL_MS);
  }
}

/** The principal's limits, only for a key that has some: calls of every other key stay on the synchronous path. */
function limitsOf(key: ApiKey): Pick<Principal, 'limits'> {
  const scopes = key.scopes ?? null;
  const perMinute = key.rateLimitPerMinute ?? null;
  if (scopes === null && !key.readOnly && perMinute === null) return {};
  return { limits: { scopes, readOnly: key.readOnly, perMinute } };
}

const UNKNOWN_PREFIX_TTL_MS = 10_000;
const UNKNOWN_PREFIX_LIMIT = 10_000;

function prefixOf(presented: string): string {
  const match = KEY_FORMAT.exec(presented);
  if (!match) throw unauthenticated('Invalid API key');
  return match[1]!;
}
