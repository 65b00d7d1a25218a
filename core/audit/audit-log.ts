import { randomUUID } from 'node:crypto';
import type { EntityManager } from '@mikro-orm/postgresql';
import { GroupWrite } from '../db/group-write.ts';
import type { Database } from '../db/orm.ts';
import type { AuthenticatedContext } from '../base/context.ts';
import { toOrderBy, toWhere, type ListEnvelope, type ListQuery } from '../records/list-query.ts';
import { defineRecord, type InferRecord } from '../records/records.ts';
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
  /** The entries of reads, written together when they arrive together. */
  readonly #reads: GroupWrite<AuditEntry>;

  constructor({ db }: { db: Database }) {
    this.#reads = new GroupWrite((entries) => db.forkEm(null).insertMany(AuditEntry, entries));
  }

  /**
   * Writes one entry now, through `em` (the transaction of the change it
   * records): if it cannot be written, it throws, and the change is rolled back.
   */
  async record(em: EntityManager, ctx: AuthenticatedContext, action: AuditAction): Promise<void> {
    await em.insert(AuditEntry, entryOf(ctx, action));
  }

  /**
   * Records a read of a value the caller may not have without its entry:
   * resolves once the entry is committed and throws when it could not be, so
   * the value is answered only after its read is on record. Reads that arrive
   * while entries are being written wait for the next write and share it (one
   * statement, one commit: group commit), so concurrent reads do not queue
   * for a commit each.
   */
  recordRead(ctx: AuthenticatedContext, action: AuditAction): Promise<void> {
    return this.#reads.add(entryOf(ctx, action));
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

function entryOf(ctx: AuthenticatedContext, action: AuditAction): AuditEntry {
  return {
    id: randomUUID(),
    subscriptionId: ctx.subscriptionId,
    at: new Date(),
    ...action,
    userId: ctx.userId,
    role: ctx.role,
    apiKeyId: ctx.apiKeyId,
    sessionId: ctx.sessionId,
    requestId: ctx.requestId,
  };
}
