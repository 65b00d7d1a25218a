import * as v from 'valibot';
import { defineExtensionPoint } from '../plugin/extension-points.ts';

/** One event a plugin emits to clients (WebSocket now, webhooks later), as listed in `GET /api/rpc`. */
export interface EventDeclaration {
  /** Dotted, lower-case: `note.added`; a name clients already know stays as it is (`dataScopeRefreshed`). */
  name: string;
  /** One line: when it is sent and what its payload holds. */
  describe: string;
}

declare module '../plugin/extension-points.ts' {
  interface ExtensionPoints {
    'core.events': EventDeclaration;
  }
}

export const eventsPoint = defineExtensionPoint({
  id: 'core.events',
  describe: 'The event catalogue: every event a plugin sends to the clients of a subscription.',
  contribution: v.object({
    name: v.pipe(v.string(), v.regex(/^[a-z][a-zA-Z0-9]*(\.[a-z][a-zA-Z0-9]*)*$/, 'name must be camelCase words, dotted like "note.added"')),
    describe: v.pipe(v.string(), v.minLength(1, 'describe must not be empty')),
  }),
});
