import * as v from 'valibot';
import { broadcastParams } from './broadcast.ts';
import { defineOperation } from './deps.ts';

export const sendBroadcast = defineOperation({
  access: 'staff',
  kind: 'write',
  describe:
    "Push a notification (title, body, url opened on click) to the browsers of the subscription's users: all of them, some users, or those on some channels; they also get it in the app. Answers at once; the sending runs in the background.",
  result: v.strictObject({ message: v.string() }),
  params: broadcastParams,
  handler: ({ params, ctx, deps }) => deps.broadcastService.sendBroadcast(ctx, params),
});
