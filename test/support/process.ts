import { spawn, type ChildProcess } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const ROOT = fileURLToPath(new URL('../..', import.meta.url));

/** node's arguments in `npm start` (`... && exec node <args>`), so tests and the benchmark start the server exactly as it does (test/run.ts builds first). */
export const START_ARGS: string[] = JSON.parse(readFileSync(path.join(ROOT, 'package.json'), 'utf8'))
  .scripts.start.replace(/^.*exec node /, '')
  .split(' ');

/** Runs the server as `npm start` does, with only the given environment. */
export const runServer = (env: Record<string, string>): RunningProcess => runInProject(process.execPath, START_ARGS, env);

export interface Exit {
  code: number | null;
  signal: NodeJS.Signals | null;
}

export interface RunningProcess {
  child: ChildProcess;
  stdout(): string;
  stderr(): string;
  /** Resolves with the exit code and signal once the output has drained, or rejects after timeoutMs with the output. */
  exited(timeoutMs: number): Promise<Exit>;
}

/** What a test file started and has not seen exit; those in a group of their own are killed with their group. */
const running = new Map<ChildProcess, { group: boolean }>();

/** Runs a command in the project folder as a user would, with only the given environment (plus PATH and HOME). */
export const runInProject = (command: string, args: string[], env: Record<string, string>): RunningProcess => start(ROOT, command, args, env, false);

/**
 * Runs a command (npm, npx) in the given folder, with only the given environment
 * (plus PATH and HOME), in a process group of its own: what it starts in turn
 * is killed with it.
 */
export const runIn = (cwd: string, command: string, args: string[], env: Record<string, string>): RunningProcess => start(cwd, command, args, env, true);

function start(cwd: string, command: string, args: string[], env: Record<string, string>, group: boolean): RunningProcess {
  const child = spawn(command, args, {
    cwd,
    env: { PATH: process.env.PATH ?? '', HOME: process.env.HOME ?? tmpdir(), ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
    detached: group,
  });
  running.set(child, { group });
  let out = '';
  let err = '';
  child.stdout!.on('data', (chunk) => (out += chunk));
  child.stderr!.on('data', (chunk) => (err += chunk));
  // 'close' waits for the pipes to drain too.
  const exit = new Promise<Exit>((resolve) =>
    child.once('close', (code, signal) => {
      running.delete(child);
      resolve({ code, signal });
    }),
  );
  return {
    child,
    stdout: () => out,
    stderr: () => err,
    exited(timeoutMs) {
      let timer: NodeJS.Timeout | undefined;
      const timeout = new Promise<never>((_, reject) => {
        timer = setTimeout(() => reject(new Error(`process ${child.pid} did not exit within ${timeoutMs} ms\nstdout: ${out}\nstderr: ${err}`)), timeoutMs);
      });
      return Promise.race([exit, timeout]).finally(() => clearTimeout(timer));
    },
  };
}

/** Kills what a test file started and left running (call it in `after`). */
export function killLeftoverProcesses(): void {
  for (const [child, { group }] of running) {
    if (!group || !child.pid) child.kill('SIGKILL');
    else {
      try {
        process.kill(-child.pid, 'SIGKILL');
      } catch {
        // The group is gone already.
      }
    }
  }
}

/** A free TCP port on 127.0.0.1 (the server cannot report the port it picked for PORT=0). */
export async function freePort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => resolve());
  });
  const { port } = server.address() as { port: number };
  await new Promise<void>((resolve) => server.close(() => resolve()));
  return port;
}

/** Waits until the server at `base` answers /health, failing with its output if it exits or takes longer than `timeoutMs`. */
export async function whenHealthy(server: RunningProcess, base: string, timeoutMs = 30_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    if (server.child.exitCode !== null) throw new Error(`server exited early:\n${server.stdout()}\n${server.stderr()}`);
    if (Date.now() > deadline) throw new Error(`no /health within ${timeoutMs} ms:\n${server.stdout()}\n${server.stderr()}`);
    const healthy = await fetch(`${base}/health`, { signal: AbortSignal.timeout(1000) })
      .then((response) => response.status === 200)
      .catch(() => false);
    if (healthy) return;
    await new Promise((resolve) => setTimeout(resolve, 200));
  }
}
