import { randomUUID } from 'node:crypto';
import * as v from 'valibot';
import {
  defineRecord,
  notFound,
  toOrderBy,
  toWhere,
  type AuthenticatedContext,
  type Database,
  type EventBus,
  type InferRecord,
  type ListEnvelope,
  type ListQuery,
} from 'rpc-service/plugin';
import { Notification } from './notification.entity.ts';

export const NOTIFICATION = defineRecord(Notification, { hide: ['subscriptionId', 'dedupeKey'] });
export type NotificationRecord = InferRecord<typeof NOTIFICATION>;

export interface NewNotification {
  subscriptionId: string;
  /** Users of that subscription to notify, one notification each. */
  userIds: readonly string[];
  title: string;
  message: string;
  /** The plugin making it. */
  source: string;
  data?: Record<string, unknown>;
  /** Makes notify idempotent: users who already have a notification with this key get no second one. */
  dedupeKey?: string;
}

/** The event each notification is pushed to its user as (declared in index.ts). */
export const NOTIFICATION_CREATED = 'notification.created';

/** What getSchema answers: a JSON Schema of an object, each property described by its keywords. */
export const JSON_SCHEMA = v.strictObject({
  $schema: v.string(),
  title: v.string(),
  type: v.literal('object'),
  required: v.array(v.string()),
  properties: v.record(v.string(), v.record(v.string(), v.unknown())),
  additionalProperties: v.boolean(),
});

/** The JSON Schema of a notification record (NotificationRpc.getSchema). */
const SCHEMA: v.InferOutput<typeof JSON_SCHEMA> = {
  $schema: 'https://json-schema.org/draft/2020-12/schema',
  title: 'Notification',
  type: 'object',
  required: ['_id', 'title', 'message', 'read', 'timestamp', 'userId'],
  properties: {
    _id: { type: 'string', format: 'uuid' },
    title: { type: 'string' },
    message: { type: 'string' },
    read: { type: 'boolean', default: false },
    timestamp: { type: 'string', format: 'date-time' },
    userId: { type: 'string', format: 'uuid' },
    source: { type: 'string', description: 'the part of the platform that made it' },
    data: { type: ['object', 'null'], description: 'what it is about (ids clients link to)' },
  },
  additionalProperties: false,
};

/**
 * Notifications: made by other plugins for users of a subscription
 * (`notify`), pushed to each user over the WebSocket as
 * `notification.created`, and read, marked and deleted by their user only
 * (NotificationRpc, one method per operation).
 */
export class NotificationService {
  readonly #db: Database;
  readonly #bus: EventBus;

  constructor({ db, bus }: { db: Database; bus: EventBus }) {
    this.#db = db;
    this.#bus = bus;
  }

  async notify(input: NewNotification): Promise<NotificationRecord[]> {
    const em = this.#db.forkEm(input.subscriptionId);
    let userIds = [...new Set(input.userIds)];
    if (input.dedupeKey !== undefined && userIds.length > 0) {
      const notified = await em.find(Notification, { dedupeKey: input.dedupeKey, userId: { $in: userIds } }, { fields: ['userId'] });
      const done = new Set(notified.map((notification) => notification.userId));
      userIds = userIds.filter((userId) => !done.has(userId));
    }
    if (userIds.length === 0) return [];
    const timestamp = new Date();
    const notifications = userIds.map((userId) =>
      em.create(Notification, {
        id: randomUUID(),
        subscriptionId: input.subscriptionId,
        userId,
        title: input.title,
        message: input.message,
        read: false,
        timestamp,
        source: input.source,
        data: input.data ?? null,
        dedupeKey: input.dedupeKey ?? null,
      }),
    );
    await em.flush();
    const records = notifications.map(NOTIFICATION.toRecord);
    for (const record of records) {
      await this.#bus.publish({ name: NOTIFICATION_CREATED, payload: record, subscriptionId: input.subscriptionId, userIds: [record.userId] });
    }
    return records;
  }

  getSchema(): v.InferOutput<typeof JSON_SCHEMA> {
    return SCHEMA;
  }

  /** The caller's notifications, newest first unless sorted. */
  async getData(ctx: AuthenticatedContext, query: ListQuery): Promise<ListEnvelope<NotificationRecord>> {
    const sort = toOrderBy(query.sort, NOTIFICATION.fields);
    const [notifications, totalCount] = await ctx.em.findAndCount(
      Notification,
      { $and: [{ userId: ctx.userId }, toWhere(query.filter, NOTIFICATION.fields)] },
      {
        orderBy: { ...sort, ...(Object.keys(sort).length === 0 ? { timestamp: 'desc' } : {}), id: 'asc' },
        limit: query.pageSize,
        offset: (query.page - 1) * query.pageSize,
      },
    );
    return { data: notifications.map(NOTIFICATION.toRecord), totalCount };
  }

  async findById(ctx: AuthenticatedContext, id: string): Promise<NotificationRecord> {
    const notification = await ctx.em.findOne(Notification, { id, userId: ctx.userId });
    if (!notification) throw notFound(`Notification ${id} not found`);
    return NOTIFICATION.toRecord(notification);
  }

  async delete(ctx: AuthenticatedContext, id: string): Promise<true> {
    if ((await ctx.em.nativeDelete(Notification, { id, userId: ctx.userId })) === 0) throw notFound(`Notification ${id} not found`);
    return true;
  }

  async markAsRead(ctx: AuthenticatedContext, id: string): Promise<true> {
    if ((await ctx.em.nativeUpdate(Notification, { id, userId: ctx.userId }, { read: true })) === 0) throw notFound(`Notification ${id} not found`);
    return true;
  }

  /** Marks the caller's unread notifications read; the number marked. */
  markAllAsRead(ctx: AuthenticatedContext): Promise<number> {
    return ctx.em.nativeUpdate(Notification, { userId: ctx.userId, read: false }, { read: true });
  }

  /** Deletes the caller's notifications; the number deleted. */
  deleteAll(ctx: AuthenticatedContext): Promise<number> {
    return ctx.em.nativeDelete(Notification, { userId: ctx.userId });
  }
}
