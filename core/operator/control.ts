import { chmodSync, existsSync, lstatSync, rmSync, type Stats } from 'node:fs';
import { connect, createServer, type Socket } from 'node:net';
import path from 'node:path';
import { createInterface } from 'node:readline';
import { pino } from 'pino';
import { createApp, type App } from '../app/app.ts';
import { embeddedDatabaseDir, hasEmbeddedDatabase, writableByOthers, type Config } from '../base/config.ts';
import type { Logger } from '../base/logger.ts';
import { OperatorError, type OperatorCommand, type Progress, type Report } from './command.ts';

/**
 * The control socket: `DATA_DIR/control.sock`, a Unix socket only the
 * service's user may open (0600 in a 0700 folder; the service refuses a
 * DATA_DIR other users may write, core/base/config.ts). A serving process answers
 * operator commands on it, so that `rpc-service backup` works while the
 * service runs on the embedded database, which one process owns. One request
 * per connection, as JSON lines: `{command, args}` in; `{progress}` lines,
 * then `{result}` or `{error}` out.
 */
export const controlSocketPath = (dataDir: string): string => path.join(dataDir, 'control.sock');

/** Unix socket paths are short (108 bytes on Linux, with the terminating NUL). */
const MAX_SOCKET_PATH = 107;
/** The most a request line may hold: a command name and a few arguments. */
const MAX_REQUEST_BYTES = 64 * 1024;
/** Progress lines at most this often, so a fast copy does not flood the socket. */
const PROGRESS_EVERY_MS = 100;

type Commands = Readonly<Record<string, OperatorCommand<never>>>;

interface Answer {
  progress?: Progress;
  result?: unknown;
  error?: { message: string; operator: boolean };
}

/** Runs one command, or says it does not exist. */
async function runCommand(app: App, commands: Commands, name: string, args: unknown, report: Report): Promise<unknown> {
  const command = Object.hasOwn(commands, name) ? commands[name] : undefined;
  if (!command) throw new OperatorError(`unknown command "${name}"`);
  return (command as OperatorCommand<unknown>).run(app, args ?? {}, report);
}

/** A stage's first and last report always go, so the command line's bar starts and ends with the command's. */
function throttled(send: (progress: Progress) => void): Report {
  let last = 0;
  let stage: string | undefined;
  return (progress) => {
    const now = Date.now();
    if (now - last < PROGRESS_EVERY_MS && progress.label === stage && progress.done !== progress.total) return;
    last = now;
    stage = progress.label;
    send(progress);
  };
}

/**
 * Whether something answers on the socket: a serving process of this
 * DATA_DIR. Nothing is sent, nor connected to, unless the socket is this
 * user's (or root's) in a folder no other user may write: another user's
 * socket there may be theirs, put there to read what a command sends (the
 * password of `admin create`).
 */
function answering(socketPath: string): Promise<Socket | null> {
  let found: Stats;
  try {
    found = lstatSync(socketPath);
  } catch {
    return Promise.resolve(null);
  }
  const open = writableByOthers(path.dirname(socketPath));
  if (open) return Promise.reject(new OperatorError(`the control socket cannot be trusted: ${open}`));
  const me = process.getuid?.();
  if (me !== undefined && found.uid !== me && found.uid !== 0) {
    return Promise.reject(
      new OperatorError(
        `${socketPath} belongs to uid ${found.uid}, neither this user (uid ${me}) nor root: another user may have put it there to read what a command sends, so nothing was sent; remove it, and see who else can write ${path.dirname(socketPath)}`,
      ),
    );
  }
  return new Promise((resolve) => {
    const socket = connect(socketPath);
    socket.once('connect', () => resolve(socket));
    socket.once('error', () => resolve(null));
  });
}

export interface ControlServer {
  close(): Promise<void>;
}

/** Listens on the control socket of the app's DATA_DIR; a socket left by a process that ended is replaced. */
export async function startControlServer(app: App, commands: Commands, logger: Logger): Promise<ControlServer> {
  const socketPath = controlSocketPath(app.config.dataDir);
  if (socketPath.length > MAX_SOCKET_PATH) {
    logger.warn({ socketPath }, 'DATA_DIR is too long a path for the control socket: operator commands cannot reach this process');
    return { close: async () => undefined };
  }
  const other = await answering(socketPath);
  if (other) {
    other.destroy();
    throw new OperatorError(`another process serves ${app.config.dataDir} (its control socket answers)`);
  }
  rmSync(socketPath, { force: true });
  const sockets = new Set<Socket>();
  const server = createServer((socket) => {
    sockets.add(socket);
    socket.once('close', () => sockets.delete(socket));
    socket.on('error', () => undefined);
    void serveOne(app, commands, socket, logger);
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(socketPath, () => resolve());
  });
  chmodSync(socketPath, 0o600);
  return {
    close: () =>
      new Promise((resolve) => {
        for (const socket of sockets) socket.destroy();
        server.close(() => resolve());
      }),
  };
}

async function serveOne(app: App, commands: Commands, socket: Socket, logger: Logger): Promise<void> {
  const write = (answer: Answer) => socket.writable && socket.write(`${JSON.stringify(answer)}\n`);
  let line: string;
  try {
    line = await firstLine(socket);
  } catch (error) {
    write({ error: { message: (error as Error).message, operator: true } });
    return void socket.end();
  }
  let request: { command?: unknown; args?: unknown };
  try {
    request = JSON.parse(line) as typeof request;
  } catch {
    write({ error: { message: 'the request is not JSON', operator: true } });
    return void socket.end();
  }
  const name = String(request.command);
  logger.info({ command: name }, 'operator command');
  try {
    const result = await runCommand(
      app,
      commands,
      name,
      request.args,
      throttled((progress) => write({ progress })),
    );
    write({ result });
  } catch (error) {
    const operator = error instanceof OperatorError;
    if (!operator) logger.error({ err: error, command: name }, 'operator command failed');
    write({ error: { message: (error as Error).message, operator } });
  }
  socket.end();
}

function firstLine(socket: Socket): Promise<string> {
  return new Promise((resolve, reject) => {
    let buffered = '';
    const onData = (chunk: Buffer) => {
      buffered += chunk.toString('utf8');
      const end = buffered.indexOf('\n');
      if (end >= 0) {
        socket.off('data', onData);
        resolve(buffered.slice(0, end));
      } else if (buffered.length > MAX_REQUEST_BYTES) {
        socket.off('data', onData);
        reject(new Error('the request line is too long'));
      }
    };
    socket.on('data', onData);
    socket.once('end', () => reject(new Error('the request ended before its line')));
  });
}

/** Over the socket: progress to `report`, then the result, or the command's error. */
function askServer(socket: Socket, name: string, args: unknown, report: Report): Promise<unknown> {
  return new Promise((resolve, reject) => {
    let settled = false;
    const lines = createInterface({ input: socket });
    lines.on('line', (line) => {
      const answer = JSON.parse(line) as Answer;
      if (answer.progress) return report(answer.progress);
      settled = true;
      if (answer.error) reject(answer.error.operator ? new OperatorError(answer.error.message) : new Error(answer.error.message));
      else resolve(answer.result);
    });
    lines.once('close', () => {
      if (!settled) reject(new OperatorError('the serving process closed the control socket before answering (did it stop?)'));
    });
    socket.write(`${JSON.stringify({ command: name, args })}\n`);
  });
}

/**
 * Refuses when a process serves this DATA_DIR (its control socket answers) or,
 * on the embedded database, when the folder is still marked in use: opened
 * twice, PGlite's files would be damaged.
 */
export async function refuseWhileServed(config: Config): Promise<void> {
  const socket = await answering(controlSocketPath(config.dataDir));
  if (socket) {
    socket.destroy();
    throw new OperatorError(`the service is running on ${config.dataDir}: stop it first`);
  }
  if (!config.databaseUrl && existsSync(path.join(embeddedDatabaseDir(config.dataDir), 'postmaster.pid'))) {
    throw new OperatorError(
      `the embedded database in ${config.dataDir} is in use by a process that does not answer on its control socket (or was not shut down cleanly): stop it, or start and stop the service once`,
    );
  }
}

/**
 * Runs an operator command where it can run: in the process that serves this
 * DATA_DIR when one answers on the control socket, else here, with an app
 * that does no background work.
 */
export async function runOperatorCommand(config: Config, commands: Commands, name: string, args: unknown, report: Report): Promise<unknown> {
  const socket = await answering(controlSocketPath(config.dataDir));
  if (socket) {
    try {
      return await askServer(socket, name, args, report);
    } finally {
      socket.destroy();
    }
  }
  await refuseWhileServed(config);
  if (!config.databaseUrl && !commands[name]?.mayCreate && !hasEmbeddedDatabase(config.dataDir)) {
    throw new OperatorError(`DATA_DIR ${config.dataDir} holds no installation (no embedded database in it): check DATA_DIR`);
  }
  // Its log lines go to standard error: standard output is the command's answer.
  const app = await createApp({ config, background: false, logStream: pino.destination(2) });
  try {
    return await runCommand(app, commands, name, args, report);
  } finally {
    await app.close();
  }
}
