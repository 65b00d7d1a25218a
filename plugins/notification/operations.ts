import * as v from 'valibot';
import { listParams, recordId } from 'rpc-service/plugin';
import { defineOperation } from './deps.ts';

const id = { _id: recordId('_id') };

export const getSchema = defineOperation({
  access: 'user',
  describe: 'The JSON Schema of a notification record.',
  params: v.object({}),
  handler: ({ deps }) => deps.notificationService.getSchema(),
});

export const getData = defineOperation({
  access: 'user',
  describe:
    'Your notifications, newest first unless sorted, with document-store filters (title, message, read, timestamp, source); page 1 and pageSize 25 by default.',
  params: v.object(listParams(25)),
  handler: ({ params, ctx, deps }) => deps.notificationService.getData(ctx, params),
});

export const findById = defineOperation({
  access: 'user',
  describe: 'One of your notifications.',
  params: v.object(id),
  handler: ({ params, ctx, deps }) => deps.notificationService.findById(ctx, params._id),
});

export const remove = defineOperation({
  access: 'user',
  describe: 'Delete one of your notifications; answers true.',
  params: v.object(id),
  handler: ({ params, ctx, deps }) => deps.notificationService.delete(ctx, params._id),
});

export const markAsRead = defineOperation({
  access: 'user',
  describe: 'Mark one of your notifications read; answers true.',
  params: v.object(id),
  handler: ({ params, ctx, deps }) => deps.notificationService.markAsRead(ctx, params._id),
});

export const markAllAsRead = defineOperation({
  access: 'user',
  describe: 'Mark all your unread notifications read; answers how many.',
  params: v.object({}),
  handler: ({ ctx, deps }) => deps.notificationService.markAllAsRead(ctx),
});

export const deleteAll = defineOperation({
  access: 'user',
  describe: 'Delete all your notifications; answers how many.',
  params: v.object({}),
  handler: ({ ctx, deps }) => deps.notificationService.deleteAll(ctx),
});
