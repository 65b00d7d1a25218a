import { createApp } from './app.ts';
import { ConfigError, loadConfig } from './config.ts';
import { DatabaseStartupError } from './db/orm.ts';
import { PluginLoadError } from './plugin/loader.ts';

/** `npm start`: configuration from the environment, then serve until SIGTERM or SIGINT. */
async function main(): Promise<void> {
  const config = loadConfig();
  const app = await createApp({ config });
  await app.listen();
  let stopping = false;
  const stop = (signal: string) => {
    if (stopping) return;
    stopping = true;
    app.logger.info({ signal }, 'shutting down');
    app
      .close()
      .then(() => process.exit(0))
      .catch((err) => {
        app.logger.error({ err }, 'shutdown failed');
        process.exit(1);
      });
  };
  process.on('SIGTERM', () => stop('SIGTERM'));
  process.on('SIGINT', () => stop('SIGINT'));
}

main().catch((error: Error) => {
  const known = error instanceof ConfigError || error instanceof DatabaseStartupError || error instanceof PluginLoadError;
  console.error(known ? `Cannot start: ${error.message}` : error);
  process.exit(1);
});
