import { createApp } from '../app/app.ts';
import { loadConfig } from '../base/config.ts';

/** `npm run migrate`: applies pending migrations of the core and every plugin, then exits. */
const app = await createApp({ config: loadConfig() }).catch((error: Error) => {
  console.error(`Cannot migrate: ${error.message}`);
  process.exit(1);
});
const pending = await app.deps.db.pendingMigrations();
console.log(pending.length === 0 ? 'Database schema is up to date.' : `Still pending: ${pending.join(', ')}`);
await app.close();
