import * as v from 'valibot';
import { defineExtensionPoint } from '../base/extension-points.ts';

/** One event a plugin emits to clients (WebSocket now, webhooks later), as listed in `GET /api/rpc`. */
export interface EventDeclaration {
  /** Dotted, lower-case: `note.added`; a name clients already know stays as it is (`dataScopeRefreshed`). */
  name: string;
  /** One line: when it is sent and what its payload holds. */
  describe: string;
  /**
   * The payload as clients receive it, after JSON (dates as ISO text, as a
   * record view's `.schema` says): listed in the OpenRPC document's
   * `x-events`, and every publication is checked against it with CHECK_RESULTS.
   */
  payload?: v.GenericSchema;
}

declare module '../base/extension-points.ts' {
  interface ExtensionPoints {
    'core.events': EventDeclaration;
  }
}

export const eventsPoint = defineExtensionPoint({
  id: 'core.events',
  describe: 'The event catalogue: every event a plugin sends to the clients of a subscription, with the valibot schema of its payload where declared.',
  contribution: v.object({
    name: v.pipe(v.string(), v.regex(/^[a-z][a-zA-Z0-9]*(\.[a-z][a-zA-Z0-9]*)*$/, 'name must be camelCase words, dotted like "note.added"')),
    describe: v.pipe(v.string(), v.minLength(1, 'describe must not be empty')),
    // The loader's test for an operation's params and result (core/plugin/loader.ts).
    payload: v.optional(
      v.custom<v.GenericSchema>(
        (value) => typeof value === 'object' && value !== null && v.isOfKind('schema', value as v.GenericSchema),
        'payload must be a valibot schema',
      ),
    ),
  }),
});
