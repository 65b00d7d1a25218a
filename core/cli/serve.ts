import { createServer } from 'node:net';
import { createApp, describeAllSettings, loadPlugins } from '../app/app.ts';
import { listenOn } from '../doors/server.ts';
import { ConfigError, loadConfig, makeDataFolder, type Config } from '../base/config.ts';
import { DatabaseStartupError } from '../db/orm.ts';
import { OperatorError } from '../operator/command.ts';
import { OPERATOR_COMMANDS } from '../operator/commands.ts';
import { startControlServer, type ControlServer } from '../operator/control.ts';
import { PluginLoadError } from '../base/plugin-errors.ts';

/**
 * `npm start` and `rpc-service serve`: configuration from the environment,
 * then serve until SIGTERM or SIGINT; with printConfig, list the settings
 * instead. A refusal to start is one line on stderr and exit code 1.
 */
export async function serve(options: { printConfig?: boolean } = {}): Promise<void> {
  try {
    await start(options.printConfig ?? false);
  } catch (error) {
    const known = error instanceof ConfigError || error instanceof DatabaseStartupError || error instanceof PluginLoadError || error instanceof OperatorError;
    // A plugin's load error ends with its code, which the table of an author's mistakes in docs/plugin-sdk.md lists.
    const code = error instanceof PluginLoadError ? ` (${error.code})` : '';
    console.error(known ? `Cannot start: ${(error as Error).message}${code}` : error);
    process.exit(1);
  }
}

async function start(printConfigOnly: boolean): Promise<void> {
  // A signal during start-up waits for the start to finish, then shuts down cleanly.
  let signalled: string | undefined;
  let stop = (signal: string) => void (signalled ??= signal);
  process.on('SIGTERM', () => stop('SIGTERM'));
  process.on('SIGINT', () => stop('SIGINT'));

  const config = loadConfig();
  if (printConfigOnly) return printConfig(config);
  // Its control socket is there: no other user may write DATA_DIR (core/operator/control.ts).
  makeDataFolder(config.dataDir);
  await checkAddress(config);
  const app = await createApp({ config });
  let control: ControlServer | undefined;
  let stopping = false;
  stop = (signal: string) => {
    if (stopping) return;
    stopping = true;
    app.logger.info({ signal }, 'shutting down');
    Promise.resolve(control?.close())
      .then(() => app.close())
      .then(() => process.exit(0))
      .catch((err) => {
        app.logger.error({ err }, 'shutdown failed');
        process.exit(1);
      });
  };
  if (signalled) return stop(signalled);
  // The port was taken since checkAddress: close the database before reporting it.
  await app.listen().catch(async (error: Error) => {
    await app.close();
    throw error;
  });
  // Operator commands (backup, jobs, doctor) reach this process here: on the embedded database no other process may open it.
  control = await startControlServer(app, OPERATOR_COMMANDS, app.logger).catch(async (error: Error) => {
    await app.close();
    throw error;
  });
  if (signalled) stop(signalled);
}

/**
 * Listens on HOST:PORT once before anything opens, so a HOST that is not an
 * address here or a busy PORT (say, the service already running) stops
 * start-up at once, before the database is opened or migrated.
 */
async function checkAddress({ port, host }: Config): Promise<void> {
  const probe = createServer();
  await listenOn(probe, port, host);
  await new Promise((resolve) => probe.close(resolve));
}

/** `--print-config`: every setting of the core and of each plugin, its default and whether it is set. */
async function printConfig(config: ReturnType<typeof loadConfig>): Promise<void> {
  const settings = describeAllSettings(await loadPlugins({ config }));
  for (const setting of settings) {
    const state = config.env[setting.name] ? 'set' : setting.default === null ? 'unset' : `default ${setting.default || '(empty)'}`;
    console.log(`${setting.name.padEnd(36)} ${setting.owner.padEnd(12)} ${state.padEnd(24)} ${setting.description}`);
  }
}
