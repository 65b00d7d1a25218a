import { randomUUID } from 'node:crypto';
import {
  conflict,
  defineRecord,
  notFound,
  validationError,
  type AuditAction,
  type AuditLog,
  type AuthenticatedContext,
  type EntityManager,
  type EventBus,
  type InferRecord,
  type Keyring,
  type ListEnvelope,
} from 'rpc-service/plugin';
import { ScopedSecret, type Scope } from './scoped-secret.entity.ts';

/** Where a secret applies, and its key there. */
export interface Place {
  scope: Scope;
  projectId: string | null;
  agentName: string | null;
  key: string;
}

export const SCOPED_SECRET = defineRecord(ScopedSecret, { hide: ['subscriptionId', 'value'] });
export type ScopedSecretRecord = InferRecord<typeof SCOPED_SECRET>;

export interface CreateInput extends Place {
  value: string;
  label?: string | null;
  description?: string | null;
}

export interface UpdateInput extends Partial<Place> {
  value?: string | null;
  label?: string | null;
  description?: string | null;
}

export interface ListInput {
  scope?: Scope;
  projectId?: string | null;
  agentName?: string | null;
  page: number;
  pageSize: number;
}

export const SCOPED_SECRET_CHANGED = 'scopedSecret.changed';
// The audit kind SecretsRpc.getAuditLog lists: both secret groups share it.
const AUDIT_KIND = 'secret';
const GROUP = 'SecretsManagerRpc';

export const SCOPE_OPTIONS = [
  { value: 'subscription', label: 'Subscription' },
  { value: 'project', label: 'Project' },
  { value: 'agent', label: 'Agent' },
] as const;

const toRecord = SCOPED_SECRET.toRecord;

/** `subscription/KEY`, `project:<id>/KEY`, `agent:<name>/KEY`, `project:<id>/agent:<name>/KEY`: for the audit log. */
function placeName(place: Place): string {
  const parts = place.scope === 'subscription' ? ['subscription'] : [];
  if (place.projectId !== null) parts.push(`project:${place.projectId}`);
  if (place.agentName !== null) parts.push(`agent:${place.agentName}`);
  return [...parts, place.key].join('/');
}

/** A subscription secret has neither project nor agent; a project secret names its project; an agent secret its agent (and may name a project). */
function checkPlace(place: Place): void {
  const issues = [];
  if (place.scope === 'project' && place.projectId === null) issues.push({ path: 'projectId', message: 'a project secret needs projectId' });
  if (place.scope === 'agent' && place.agentName === null) issues.push({ path: 'agentName', message: 'an agent secret needs agentName' });
  if (place.scope !== 'agent' && place.agentName !== null) issues.push({ path: 'agentName', message: `a ${place.scope} secret has no agentName` });
  if (place.scope === 'subscription' && place.projectId !== null) issues.push({ path: 'projectId', message: 'a subscription secret has no projectId' });
  if (issues.length > 0) throw validationError(issues);
}

const samePlace = (a: Place, b: Place): boolean => a.scope === b.scope && a.projectId === b.projectId && a.agentName === b.agentName && a.key === b.key;

/**
 * Scope-based secrets: metadata for every user of the subscription, values
 * sealed by the keyring and read only through `getSecretValue` (audited), which
 * other groups use to resolve the secrets of a project or an agent.
 */
export class ScopedSecretsService {
  readonly #keyring: Keyring;
  readonly #audit: AuditLog;
  readonly #bus: EventBus;

  constructor({ keyring, audit, bus }: { keyring: Keyring; audit: AuditLog; bus: EventBus }) {
    this.#keyring = keyring;
    this.#audit = audit;
    this.#bus = bus;
  }

  async getData(ctx: AuthenticatedContext, input: ListInput): Promise<ListEnvelope<ScopedSecretRecord>> {
    const where: Record<string, unknown> = {};
    if (input.scope !== undefined) where.scope = input.scope;
    if (input.projectId != null) where.projectId = input.projectId;
    if (input.agentName != null) where.agentName = input.agentName;
    const [secrets, totalCount] = await ctx.em.findAndCount(ScopedSecret, where, {
      orderBy: { scope: 'asc', projectId: 'asc', agentName: 'asc', key: 'asc' },
      limit: input.pageSize,
      offset: (input.page - 1) * input.pageSize,
    });
    return { data: secrets.map(toRecord), totalCount };
  }

  /** Creates the secret of that place and key, or gives the existing one the new value and metadata. */
  async create(ctx: AuthenticatedContext, input: CreateInput): Promise<ScopedSecretRecord> {
    const place = { scope: input.scope, projectId: input.projectId, agentName: input.agentName, key: input.key };
    checkPlace(place);
    const value = await this.#keyring.seal(ctx.subscriptionId, input.value);
    const { secret, created } = await this.#transaction(ctx, async (em) => {
      const existing = await em.findOne(ScopedSecret, place);
      const secret =
        existing ??
        em.create(ScopedSecret, { id: randomUUID(), subscriptionId: ctx.subscriptionId, ...place, value, createdAt: new Date(), updatedAt: new Date() });
      secret.value = value;
      if (!existing || input.label !== undefined) secret.label = input.label ?? null;
      if (!existing || input.description !== undefined) secret.description = input.description ?? null;
      await em.flush();
      await this.#record(em, ctx, existing ? 'update' : 'create', secret);
      return { secret, created: !existing };
    });
    await this.#changed(ctx, created ? 'created' : 'updated', secret);
    return toRecord(secret);
  }

  /**
   * With a value: as create, for the place the params and the record give
   * together (a new place moves the secret there; CONFLICT if another secret
   * holds it). Without: label and description only.
   */
  async update(ctx: AuthenticatedContext, id: string, input: UpdateInput): Promise<ScopedSecretRecord> {
    const current = await this.#find(ctx.em, id);
    const place: Place = {
      scope: input.scope ?? current.scope,
      projectId: input.projectId !== undefined ? input.projectId : (current.projectId ?? null),
      agentName: input.agentName !== undefined ? input.agentName : (current.agentName ?? null),
      key: input.key ?? current.key,
    };
    const moves = !samePlace(place, toRecord(current));
    const rotates = typeof input.value === 'string';
    if (moves && !rotates) {
      throw validationError([{ path: 'value', message: 'changing scope, projectId, agentName or key rotates the secret: give its value too' }]);
    }
    checkPlace(place);
    const value = rotates ? await this.#keyring.seal(ctx.subscriptionId, input.value!) : undefined;
    const secret = await this.#transaction(ctx, async (em) => {
      const secret = await this.#find(em, id);
      if (moves) {
        if (await em.count(ScopedSecret, { ...place, id: { $ne: id } })) throw conflict(`Another secret is already at ${placeName(place)}`);
        Object.assign(secret, place);
      }
      if (value !== undefined) secret.value = value;
      if (input.label !== undefined) secret.label = input.label;
      if (input.description !== undefined) secret.description = input.description;
      await em.flush();
      await this.#record(em, ctx, 'update', secret);
      return secret;
    });
    await this.#changed(ctx, 'updated', secret);
    return toRecord(secret);
  }

  async delete(ctx: AuthenticatedContext, id: string): Promise<{ success: true }> {
    const secret = await this.#transaction(ctx, async (em) => {
      const secret = await this.#find(em, id);
      await em.remove(secret).flush();
      await this.#record(em, ctx, 'delete', secret);
      return secret;
    });
    await this.#changed(ctx, 'deleted', secret);
    return { success: true };
  }

  /** The value of one secret, returned only once its read is in the audit log. */
  async getSecretValue(ctx: AuthenticatedContext, id: string): Promise<{ value: string }> {
    const secret = await this.#find(ctx.em, id);
    const value = await this.#keyring.open(ctx.subscriptionId, secret.value);
    await this.#audit.recordRead(ctx, this.#action('read', secret));
    return { value };
  }

  #transaction<T>(ctx: AuthenticatedContext, work: (em: EntityManager) => Promise<T>): Promise<T> {
    return ctx.em.fork().transactional(work);
  }

  async #find(em: EntityManager, id: string): Promise<ScopedSecret> {
    const secret = await em.findOne(ScopedSecret, { id });
    if (!secret) throw notFound(`Secret ${id} not found`);
    return secret;
  }

  #record(em: EntityManager, ctx: AuthenticatedContext, action: string, secret: ScopedSecret): Promise<void> {
    return this.#audit.record(em, ctx, this.#action(action, secret));
  }

  #action(action: string, secret: ScopedSecret): AuditAction {
    return { kind: AUDIT_KIND, group: GROUP, action, targetId: secret.id, target: placeName(toRecord(secret)) };
  }

  #changed(ctx: AuthenticatedContext, action: string, secret: ScopedSecret): Promise<void> {
    return this.#bus.publish({ name: SCOPED_SECRET_CHANGED, subscriptionId: ctx.subscriptionId, payload: { action, ...toRecord(secret) } });
  }
}
