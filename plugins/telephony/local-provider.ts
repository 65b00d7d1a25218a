import { randomUUID } from 'node:crypto';
import { conflict, notFound, validationError, type AuthenticatedContext } from 'rpc-service/plugin';
import { TelephonyAssignment, type AssigneeKind } from './assignment.entity.ts';
import type { Assignee, TelephonyProvider } from './provider.ts';

/** Numeric order of strings of digits: shorter first, then by text, so 99 comes before 100. */
const byNumber = (a: string, b: string) => a.length - b.length || (a < b ? -1 : a > b ? 1 : 0);

/**
 * The built-in provider: the pool of TELEPHONY_EXTENSIONS is every
 * subscription's own numbering plan, and assignments are rows of
 * `telephony_assignment` in the caller's subscription.
 */
export class LocalProvider implements TelephonyProvider {
  readonly #pool: readonly string[];
  readonly #inPool: ReadonlySet<string>;

  constructor(pool: readonly string[]) {
    this.#pool = pool;
    this.#inPool = new Set(pool);
  }

  /** The pool, in its configured order, without the extensions the subscription has assigned. */
  async availableExtensions(ctx: AuthenticatedContext): Promise<string[]> {
    const assigned = await ctx.em.find(TelephonyAssignment, { subscriptionId: ctx.subscriptionId }, { fields: ['extension'] });
    const taken = new Set(assigned.map((assignment) => assignment.extension));
    return this.#pool.filter((extension) => !taken.has(extension));
  }

  /**
   * One insert that yields to the unique (subscription, extension): of two
   * assignments of one extension at once, exactly one inserts a row.
   */
  async assign(ctx: AuthenticatedContext, extension: string, assignee: Assignee): Promise<void> {
    if (!this.#inPool.has(extension)) {
      throw validationError([{ path: 'extension', message: `extension ${extension} is not in the numbering plan (TELEPHONY_EXTENSIONS)` }]);
    }
    const inserted = await ctx.em.execute<{ id: string }[]>(
      `insert into telephony_assignment (id, subscription_id, extension, kind, user_id, agent_config_id, agent_contact_id, assigned_by, created_at)
       values (?, ?, ?, ?, ?, ?, ?, ?, now())
       on conflict (subscription_id, extension) do nothing returning id`,
      [
        randomUUID(),
        ctx.subscriptionId,
        extension,
        assignee.kind,
        assignee.kind === 'user' ? assignee.userId : null,
        assignee.kind === 'agent' ? assignee.agentConfigId : null,
        assignee.kind === 'agent' ? assignee.agentContactId : null,
        ctx.userId,
      ],
    );
    if (inserted.length === 0) throw conflict(await this.#holderMessage(ctx, extension));
  }

  async disassociate(ctx: AuthenticatedContext, extension: string, kind: AssigneeKind): Promise<void> {
    const removed = await ctx.em.nativeDelete(TelephonyAssignment, { subscriptionId: ctx.subscriptionId, extension, kind });
    if (removed === 0) throw notFound(`Extension ${extension} is not assigned to ${kind === 'user' ? 'a user' : 'an agent'}`);
  }

  async extensionsOfUser(ctx: AuthenticatedContext, userId: string): Promise<string[]> {
    return this.#extensions(ctx, { kind: 'user', userId });
  }

  /** Assignments that named this contact id, or that named it as the agent's platform id (most name only that one). */
  async extensionsOfAgent(ctx: AuthenticatedContext, agentContactId: string): Promise<string[]> {
    return this.#extensions(ctx, { kind: 'agent', $or: [{ agentContactId }, { agentConfigId: agentContactId }] });
  }

  async #extensions(ctx: AuthenticatedContext, where: Record<string, unknown>): Promise<string[]> {
    const rows = await ctx.em.find(TelephonyAssignment, { subscriptionId: ctx.subscriptionId, ...where }, { fields: ['extension'] });
    return rows.map((row) => row.extension).sort(byNumber);
  }

  /** Whom the extension went to, for the CONFLICT message (the caller is an admin of the same subscription). */
  async #holderMessage(ctx: AuthenticatedContext, extension: string): Promise<string> {
    const holder = await ctx.em.findOne(TelephonyAssignment, { subscriptionId: ctx.subscriptionId, extension }, { refresh: true });
    if (!holder) return `Extension ${extension} was being assigned at the same time; try again`;
    const who = holder.kind === 'user' ? `user ${holder.userId}` : `agent ${holder.agentConfigId}`;
    return `Extension ${extension} is already assigned to ${who}`;
  }
}
