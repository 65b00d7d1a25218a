import * as v from 'valibot';
import { listParams, listSchema, recordId } from 'rpc-service/plugin';
import { defineOperation } from './deps.ts';
import { JSON_SCHEMA, NOTIFICATION } from './notification.service.ts';

const id = { _id: recordId('_id') };

export const getSchema = defineOperation({
  access: 'user',
  kind: 'read',
  describe: 'The JSON Schema of a notification record.',
  result: JSON_SCHEMA,
  params: v.object({}),
  handler: ({ deps }) => deps.notificationService.getSchema(),
});

export const getData = defineOperation({
  access: 'user',
  kind: 'read',
  describe:
    'Your notifications, newest first unless sorted, with document-store filters (title, message, read, timestamp, source); page 1 and pageSize 25 by default.',
  result: listSchema(NOTIFICATION.schema),
  params: v.object(listParams(25)),
  handler: ({ params, ctx, deps }) => deps.notificationService.getData(ctx, params),
});

export const findById = defineOperation({
  access: 'user',
  kind: 'read',
  describe: 'One of your notifications.',
  result: NOTIFICATION.schema,
  params: v.object(id),
  handler: ({ params, ctx, deps }) => deps.notificationService.findById(ctx, params._id),
});

export const remove = defineOperation({
  access: 'user',
  kind: 'write',
  describe: 'Delete one of your notifications; answers true.',
  result: v.literal(true),
  params: v.object(id),
  handler: ({ params, ctx, deps }) => deps.notificationService.delete(ctx, params._id),
});

export const markAsRead = defineOperation({
  access: 'user',
  kind: 'write',
  describe: 'Mark one of your notifications read; answers true.',
  result: v.literal(true),
  params: v.object(id),
  handler: ({ params, ctx, deps }) => deps.notificationService.markAsRead(ctx, params._id),
});

export const markAllAsRead = defineOperation({
  access: 'user',
  kind: 'write',
  describe: 'Mark all your unread notifications read; answers how many.',
  result: v.number(),
  params: v.object({}),
  handler: ({ ctx, deps }) => deps.notificationService.markAllAsRead(ctx),
});

export const deleteAll = defineOperation({
  access: 'user',
  kind: 'write',
  describe: 'Delete all your notifications; answers how many.',
  result: v.number(),
  params: v.object({}),
  handler: ({ ctx, deps }) => deps.notificationService.deleteAll(ctx),
});
