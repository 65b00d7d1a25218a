import { definePlugin } from 'rpc-service/plugin';
import { DEPS, type ConsoleDeps } from './deps.ts';
import { consoleRoutes } from './routes.ts';

/**
 * The web console at /console: plain modules and styles from `public/`,
 * calling POST /api/rpc with the session cookie. It adds no operation: every
 * page reads and writes through the operations of the plugins it shows, so
 * the server authorises each call (see README.md).
 */
export const consolePlugin = definePlugin<ConsoleDeps>({
  id: 'console',
  group: 'ConsoleRpc',
  coreVersion: '^2.0.0',
  deps: DEPS,
  operations: {},
  routes: consoleRoutes,
});
