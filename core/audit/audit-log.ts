import { randomUUID } from 'node:crypto';
import type { EntityManager } from '@mikro-orm/postgresql';
import type { AuthenticatedContext } from '../rpc/context.ts';
import { toOrderBy, toWhere, type ListEnvelope, type ListQuery } from '../rpc/list-query.ts';
import { defineRecord, type InferRecord } from '../rpc/records.ts';
import { AuditEntry } from './audit-log.entity.ts';

export interface AuditAction {
  kind: string;
  group: string;
  action: string;
  targetId: string;
  target: string;
}

const AUDIT = defineRecord(AuditEntry, { hide: ['subscriptionId'] });
export const AUDIT_FIELDS = AUDIT.fields;
/** An audit entry's schema, for operations that answer entries. */
export const AUDIT_RECORD = AUDIT.schema;
export type AuditRecord = InferRecord<typeof AUDIT>;

/** The audit trail of a subscription: appended to in the transaction of what it records, listed by kind. */
export class AuditLog {
  /**
   * Writes one entry now, through `em` (the transaction of the change, or of
   * the read it vouches for): if it cannot be written, it throws, and the
   * change is rolled back or the value is not returned.
   */
  async record(em: EntityManager, ctx: AuthenticatedContext, action: AuditAction): Promise<void> {
    await em.insert(AuditEntry, {
      id: randomUUID(),
      subscriptionId: ctx.subscriptionId,
      at: new Date(),
      ...action,
      userId: ctx.userId,
      role: ctx.role,
      apiKeyId: ctx.apiKeyId,
      sessionId: ctx.sessionId,
      requestId: ctx.requestId,
    });
  }

  /** Entries of one kind in the caller's subscription, newest first unless sorted otherwise. */
  async list(ctx: AuthenticatedContext, kind: string, query: ListQuery): Promise<ListEnvelope<AuditRecord>> {
    const where = { $and: [{ kind }, toWhere(query.filter, AUDIT_FIELDS)] };
    const orderBy = { ...toOrderBy(query.sort, AUDIT_FIELDS), id: 'asc' as const };
    const [entries, totalCount] = await ctx.em.findAndCount(AuditEntry, where, {
      orderBy: Object.keys(query.sort).length > 0 ? orderBy : { at: 'desc', id: 'asc' },
      limit: query.pageSize,
      offset: (query.page - 1) * query.pageSize,
    });
    return { data: entries.map(AUDIT.toRecord), totalCount };
  }
}
