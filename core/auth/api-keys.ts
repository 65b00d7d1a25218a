import { randomBytes, randomUUID } from 'node:crypto';
import type { Config } from '../config.ts';
import type { Database } from '../db/orm.ts';
import type { EventBus } from '../events/bus.ts';
import type { AuthenticatedContext, Principal } from '../rpc/context.ts';
import { notFound, unauthenticated } from '../rpc/errors.ts';
import type { Role } from '../../config/roles.ts';
import { CredentialCache } from './credential-cache.ts';
import { digestsEqual, randomToken, sha256, sha256Hex, type SecretBox } from './crypto.ts';
import { ApiKeySchema, type ApiKey } from './entities.ts';
import { publishCredentialChange } from './revocation.ts';

/** Keys look like `ak3f9c1e0b7d24a6_<43 base64url characters>`: a lookup prefix and a 32-byte secret. */
const KEY_FORMAT = /^(ak[0-9a-f]{14})_([A-Za-z0-9_-]{43,})$/;
const WEBHOOK_SECRET_MASK = '********';

export interface ApiKeyRecord {
  _id: string;
  subscriptionId: string;
  userId: string;
  prefix: string;
  description: string;
  isEnabled: boolean;
  initialContext: Record<string, unknown> | null;
  webhookUrl: string | null;
  webhookSecret: string | null;
  webhookStatus: string | null;
  lastTestedAt: string | null;
  createdAt: string;
  updatedAt: string;
}

export interface CreatedApiKey extends ApiKeyRecord {
  keyHash: string;
  encryptedKey: string;
  fullKey: string;
}

export interface ApiKeyChanges {
  description?: string;
  /** undefined leaves it; null clears it. */
  initialContext?: Record<string, unknown> | null;
  isEnabled?: boolean;
}

interface KeyRow {
  id: string;
  subscription_id: string;
  user_id: string;
  key_hash: string;
  is_enabled: boolean;
  initial_context: Record<string, unknown> | string | null;
  role: Role;
  is_active: boolean;
}

export function toApiKeyRecord(key: ApiKey): ApiKeyRecord {
  return {
    _id: key.id,
    subscriptionId: key.subscriptionId,
    userId: key.userId,
    prefix: key.prefix,
    description: key.description,
    isEnabled: key.isEnabled,
    initialContext: key.initialContext ?? null,
    webhookUrl: key.webhookUrl,
    // The registered secret is the caller's own, but it never leaves the service again.
    webhookSecret: key.webhookSecret ? WEBHOOK_SECRET_MASK : null,
    webhookStatus: key.webhookStatus,
    lastTestedAt: key.lastTestedAt?.toISOString() ?? null,
    createdAt: key.createdAt.toISOString(),
    updatedAt: key.updatedAt.toISOString(),
  };
}

/** API keys of the calling user, and authentication with them. */
export class ApiKeyService {
  readonly #db: Database;
  readonly #bus: EventBus;
  readonly #secretBox: SecretBox;
  readonly #cacheTtlMs: number;
  readonly cache = new CredentialCache();
  /**
   * Prefixes that matched no key, remembered briefly so a flood of made-up
   * keys does not turn into a flood of queries. Prefixes are random, so a new
   * key never carries one of them.
   */
  readonly #unknownPrefixes = new Map<string, number>();

  constructor({ db, bus, secretBox, config }: { db: Database; bus: EventBus; secretBox: SecretBox; config: Config }) {
    this.#db = db;
    this.#bus = bus;
    this.#secretBox = secretBox;
    this.#cacheTtlMs = config.authCacheTtlSeconds * 1000;
  }

  async list(ctx: AuthenticatedContext): Promise<{ data: ApiKeyRecord[]; totalCount: number }> {
    const keys = await ctx.em.find(ApiKeySchema, { userId: ctx.userId }, { orderBy: { createdAt: 'desc' } });
    return { data: keys.map(toApiKeyRecord), totalCount: keys.length };
  }

  async create(
    ctx: AuthenticatedContext,
    input: { description: string; initialContext: Record<string, unknown> | null },
  ): Promise<CreatedApiKey> {
    const prefix = `ak${randomBytes(7).toString('hex')}`;
    const fullKey = `${prefix}_${randomToken(32)}`;
    const key = ctx.em.create(ApiKeySchema, {
      id: randomUUID(),
      subscriptionId: ctx.subscriptionId,
      userId: ctx.userId,
      prefix,
      keyHash: sha256Hex(fullKey),
      encryptedKey: this.#secretBox.encrypt(fullKey),
      description: input.description,
      isEnabled: true,
      initialContext: input.initialContext,
      webhookUrl: null,
      webhookSecret: null,
      webhookStatus: null,
      lastTestedAt: null,
      createdAt: new Date(),
      updatedAt: new Date(),
    });
    await ctx.em.flush();
    return { ...toApiKeyRecord(key), keyHash: key.keyHash, encryptedKey: key.encryptedKey, fullKey };
  }

  async update(ctx: AuthenticatedContext, id: string, changes: ApiKeyChanges): Promise<ApiKeyRecord> {
    const key = await this.#own(ctx, id);
    if (changes.description !== undefined) key.description = changes.description;
    if (changes.initialContext !== undefined) key.initialContext = changes.initialContext;
    if (changes.isEnabled !== undefined) key.isEnabled = changes.isEnabled;
    await ctx.em.flush();
    await publishCredentialChange(this.#bus, { apiKeyId: key.id });
    return toApiKeyRecord(key);
  }

  async delete(ctx: AuthenticatedContext, id: string): Promise<{ success: boolean }> {
    const key = await this.#own(ctx, id);
    await ctx.em.remove(key).flush();
    await publishCredentialChange(this.#bus, { apiKeyId: key.id });
    return { success: true };
  }

  async #own(ctx: AuthenticatedContext, id: string): Promise<ApiKey> {
    const key = await ctx.em.findOne(ApiKeySchema, { id, userId: ctx.userId });
    if (!key) throw notFound(`API key ${id} not found`);
    return key;
  }

  /**
   * The principal of a key already verified and cached, without a database
   * round trip; undefined when it must be read. Throws for anything invalid.
   */
  cached(presented: string): Principal | undefined {
    const prefix = prefixOf(presented);
    const entry = this.cache.get(prefix);
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
    const readAt = this.cache.generation;
    const [row] = await this.#db.execute<KeyRow>(
      `select k.id, k.subscription_id, k.user_id, k.key_hash, k.is_enabled, k.initial_context, u.role, u.is_active
       from core_api_key k join core_user u on u.id = k.user_id where k.prefix = ?`,
      [prefix],
    );
    if (!row) {
      this.#rememberUnknown(prefix);
      throw unauthenticated('Invalid API key');
    }
    const storedHash = Buffer.from(row.key_hash, 'hex');
    if (!digestsEqual(sha256(presented), storedHash)) throw unauthenticated('Invalid API key');
    if (!row.is_enabled) throw unauthenticated('API key is disabled');
    if (!row.is_active) throw unauthenticated('The user of this API key is deactivated');
    const initialContext = typeof row.initial_context === 'string' ? JSON.parse(row.initial_context) : row.initial_context;
    const principal: Principal = {
      subscriptionId: row.subscription_id,
      userId: row.user_id,
      role: row.role,
      apiKeyId: row.id,
      sessionId: null,
      initialContext,
    };
    this.cache.set(
      prefix,
      { principal, secretHash: storedHash, expiresAt: null, lastSeenAt: null, staleAt: Date.now() + this.#cacheTtlMs },
      readAt,
    );
    return principal;
  }

  #rememberUnknown(prefix: string): void {
    if (this.#unknownPrefixes.size >= UNKNOWN_PREFIX_LIMIT) this.#unknownPrefixes.clear();
    this.#unknownPrefixes.set(prefix, Date.now() + UNKNOWN_PREFIX_TTL_MS);
  }
}

const UNKNOWN_PREFIX_TTL_MS = 10_000;
const UNKNOWN_PREFIX_LIMIT = 10_000;

function prefixOf(presented: string): string {
  const match = KEY_FORMAT.exec(presented);
  if (!match) throw unauthenticated('Invalid API key');
  return match[1]!;
}
