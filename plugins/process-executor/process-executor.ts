import { spawn, type ChildProcessWithoutNullStreams } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { constants, mkdirSync } from 'node:fs';
import { access } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import {
  conflict,
  defineRecord,
  pgArray,
  RpcError,
  validationError,
  type AuthenticatedContext,
  type Database,
  type EventBus,
  type InferRecord,
  type Logger,
  type RowOf,
} from 'rpc-service/plugin';
import type { ProcessConfig } from './config.ts';
import { killSession, parentDeathWrapper, startTicks, thisHost } from './host.ts';
import { ProcessInstance, type ProcessStatus } from './instance.entity.ts';

/** Characters a line of output keeps at most. */
const MAX_LINE = 4000;
/** The environment every process gets: nothing of the service's own (keys, database URL). */
const BASE_ENV = { PATH: '/usr/local/bin:/usr/bin:/bin', LANG: 'C.UTF-8' };

/** A process running on this node: the child, its latest lines of output, and how it is being ended. */
interface Running {
  subscriptionId: string;
  child: ChildProcessWithoutNullStreams;
  logs: string[];
  /** Partial lines of stdout and stderr, until their newline comes. */
  partial: { stdout: string; stderr: string };
  stopping: boolean;
  /** Set once its record is written: from then on its node renews the record's lease. */
  recorded: boolean;
  ended: Promise<void>;
}

/** Why the recovery job ended a record. */
const NODE_STOPPED = 'its node stopped while it ran';

/** What getProcessStatus answers: the process's state, without who started it, where, or its output (getProcessLogs). */
export const STATUS = defineRecord(ProcessInstance, {
  hide: ['id', 'subscriptionId', 'startedBy', 'nodeId', 'host', 'pid', 'pidStartedAt', 'leaseUntil', 'logs'],
});
export type ProcessStatusRecord = InferRecord<typeof STATUS>;

/**
 * Runs the commands an operator allows (PROCESS_ALLOWED_COMMANDS), without
 * a shell, each in a working folder of its own with a minimal environment.
 * Output (stdout and stderr, by line) is kept in a ring buffer of the latest
 * PROCESS_LOG_LINES lines; input goes to stdin. A process ends `exited`
 * (code 0), `failed` (another code, a signal it did not get from us, or a
 * command that could not start) or `stopped` (stopProcess: SIGTERM, then
 * SIGKILL after PROCESS_STOP_GRACE_MS). Processes belong to the node that
 * started them; their records, with the last lines once ended, are in the
 * database for every node.
 *
 * A process does not outlive its node
 * (docs/decisions/0059-processes-do-not-outlive-their-node.md): it leads a session of its own, and stopping it
 * signals the whole session (what it started in turn); on Linux the kernel
 * kills it when its node dies, even by SIGKILL; its node renews its record's
 * lease while it runs, and once the lease has run out the recovery job (any
 * node) ends the record and, on the same machine, kills what is left of its
 * session.
 */
export class ProcessExecutor {
  readonly #db: Database;
  readonly #bus: EventBus;
  readonly #config: ProcessConfig;
  readonly #logger: Logger;
  readonly #running = new Map<string, Running>();
  readonly #host = thisHost();
  #renewal: NodeJS.Timeout | undefined;

  constructor({ db, bus, config, logger }: { db: Database; bus: EventBus; config: ProcessConfig; logger: Logger }) {
    this.#db = db;
    this.#bus = bus;
    this.#config = config;
    this.#logger = logger;
  }

  /**
   * Starts a command of the allow-list; FEATURE_UNAVAILABLE when the operator
   * allows none. Only starting needs the list: the other operations act on
   * records that may predate an emptied list (an unknown one is NOT_FOUND).
   */
  async startProcess(ctx: AuthenticatedContext, command: string, args: string[]): Promise<{ instanceId: string; status: ProcessStatus; pid: number | null }> {
    if (this.#config.PROCESS_ALLOWED_COMMANDS.length === 0) {
      throw new RpcError('FEATURE_UNAVAILABLE', 'No command is allowed: the operator sets PROCESS_ALLOWED_COMMANDS to enable processes');
    }
    if (!this.#config.PROCESS_ALLOWED_COMMANDS.includes(command)) {
      throw validationError([
        { path: 'command', message: `${command} is not an allowed command; allowed: ${this.#config.PROCESS_ALLOWED_COMMANDS.join(', ')}` },
      ]);
    }
    const running = await ctx.em.count(ProcessInstance, { status: 'running' });
    if (running >= this.#config.PROCESS_MAX_RUNNING) throw conflict(`The subscription already runs ${running} processes, the most it may`);
    const id = randomUUID();
    const cwd = path.join(this.#config.PROCESS_WORK_DIR || path.join(tmpdir(), 'rpc-service-processes'), id);
    mkdirSync(cwd, { recursive: true, mode: 0o700 });
    // A command that cannot run is started directly, so that it fails as such (`error`) rather than as the wrapper's exit code.
    const wrapper = (await executable(command)) ? await parentDeathWrapper() : [];
    const [file, ...fileArgs] = [...wrapper, command, ...args] as [string, ...string[]];
    const child = spawn(file, fileArgs, { cwd, env: { ...BASE_ENV, HOME: cwd }, shell: false, stdio: ['pipe', 'pipe', 'pipe'], detached: true });
    // Read at once: until the event loop reaps it, a process that has already ended is still in /proc.
    const pidStartedAt = child.pid === undefined ? null : startTicks(child.pid);
    let settle!: () => void;
    const process: Running = {
      subscriptionId: ctx.subscriptionId,
      child,
      logs: [],
      partial: { stdout: '', stderr: '' },
      stopping: false,
      recorded: false,
      ended: new Promise((resolve) => (settle = resolve)),
    };
    this.#running.set(id, process);
    child.stdout.setEncoding('utf8').on('data', (text: string) => this.#output(process, 'stdout', text));
    child.stderr.setEncoding('utf8').on('data', (text: string) => this.#output(process, 'stderr', text));
    // Input to a process that has ended is dropped, not an error of the service.
    child.stdin.on('error', () => undefined);
    let startError: string | null = null;
    child.on('error', (error) => (startError = error.message));
    const recorded = this.#db
      .forkEm(ctx.subscriptionId)
      .execute(
        `insert into process_executor_instance (id, subscription_id, started_by, node_id, host, pid, pid_started_at, lease_until, command, args, status, logs, started_at)
         values (?, ?, ?, ?, ?, ?, ?, now() + make_interval(secs => ?), ?, ?::text[], 'running', '[]', now())`,
        [id, ctx.subscriptionId, ctx.userId, this.#bus.nodeId, this.#host, child.pid ?? null, pidStartedAt, this.#leaseSeconds(), command, pgArray(args)],
      )
      .then(() => void (process.recorded = true));
    // Its end is recorded after its start, however quickly it ends.
    child.on('close', (code, signal) => {
      void recorded.then(
        () => this.#ended(id, process, code, signal, startError).finally(settle),
        () => settle(),
      );
    });
    try {
      await recorded;
    } catch (err) {
      // Not recorded: nothing would show it or stop it.
      this.#running.delete(id);
      signalSession(process, 'SIGKILL');
      throw err;
    }
    return { instanceId: id, status: 'running', pid: child.pid ?? null };
  }

  async getProcessStatus(ctx: AuthenticatedContext, id: string): Promise<ProcessStatusRecord> {
    return STATUS.toRecord(await this.#find(ctx, id));
  }

  async getProcessLogs(ctx: AuthenticatedContext, id: string): Promise<{ logs: string[] }> {
    const instance = await this.#find(ctx, id);
    const running = this.#running.get(id);
    if (running) return { logs: [...running.logs, ...pending(running)] };
    if (instance.status === 'running') throw conflict(`Process ${id} runs on another node; ask that node`);
    return { logs: instance.logs };
  }

  async sendProcessInput(ctx: AuthenticatedContext, id: string, input: string): Promise<{ message: string }> {
    const running = await this.#local(ctx, id);
    if (!running.child.stdin.writable) throw conflict(`Process ${id} no longer reads its input`);
    await new Promise<void>((resolve, reject) =>
      running.child.stdin.write(input, (error) => (error ? reject(conflict(`Process ${id} did not take the input`)) : resolve())),
    );
    return { message: `Sent ${Buffer.byteLength(input)} bytes to process ${id}` };
  }

  /** Stops a process of the caller's subscription running on this node; answers once it has ended. */
  async stopProcess(ctx: AuthenticatedContext, id: string): Promise<{ message: string }> {
    await this.#terminate(await this.#local(ctx, id));
    return { message: `Process ${id} stopped` };
  }

  /** Renews the leases of this node's processes every third of PROCESS_LEASE_MS (at start). */
  start(): void {
    this.#renewal = setInterval(() => void this.#renew(), this.#config.PROCESS_LEASE_MS / 3).unref();
  }

  /** Ends every process of this node (on shutdown). */
  async stopAll(): Promise<void> {
    clearInterval(this.#renewal);
    await Promise.all([...this.#running.values()].map((running) => this.#terminate(running)));
  }

  /**
   * The recovery job: records still `running` whose lease has run out (their
   * node stopped, or lost the database that long) end `failed`; on the
   * machine that ran them, what is left of their session is killed.
   */
  async recover(): Promise<{ ended: number; killed: number }> {
    const em = this.#db.forkEm(null);
    let ended = 0;
    let killed = 0;
    for (;;) {
      const rows = await em.execute<RowOf<ProcessInstance, 'id' | 'host' | 'pid' | 'pidStartedAt'>[]>(
        `update process_executor_instance set status = 'failed', error = ?, ended_at = now(), lease_until = null
         where (subscription_id, id) in (
           select subscription_id, id from process_executor_instance where status = 'running' and (lease_until is null or lease_until < now())
           order by lease_until limit 100 for update skip locked)
         returning id, host, pid, pid_started_at`,
        [NODE_STOPPED],
      );
      for (const row of rows) {
        if (this.#host && row.host === this.#host && row.pid && row.pid_started_at) killed += killSession(row.pid, row.pid_started_at);
      }
      ended += rows.length;
      if (rows.length < 100) break;
    }
    if (ended > 0) this.#logger.warn({ ended, killed }, 'ended the records of processes whose node stopped');
    return { ended, killed };
  }

  /**
   * Renews the leases of this node's recorded processes. One whose record
   * was ended meanwhile (the recovery job took this node for dead) is killed:
   * a record that says ended means its process is gone.
   */
  async #renew(): Promise<void> {
    const recorded = [...this.#running].filter(([, running]) => running.recorded).map(([id]) => id);
    if (recorded.length === 0) return;
    try {
      const renewed = await this.#db
        .forkEm(null)
        .execute<{ id: string }[]>(
          `update process_executor_instance set lease_until = now() + make_interval(secs => ?) where node_id = ? and status = 'running' returning id`,
          [this.#leaseSeconds(), this.#bus.nodeId],
        );
      const alive = new Set(renewed.map((row) => row.id));
      for (const id of recorded) {
        const running = this.#running.get(id);
        if (!running || alive.has(id)) continue;
        this.#logger.warn({ processId: id }, 'killed a process whose record was ended by the recovery job');
        signalSession(running, 'SIGKILL');
      }
    } catch (err) {
      this.#logger.error({ err }, 'could not renew the leases of running processes');
    }
  }

  #leaseSeconds(): number {
    return this.#config.PROCESS_LEASE_MS / 1000;
  }

  /** SIGTERM, then SIGKILL if it has not ended after the grace period; to its whole session. */
  async #terminate(running: Running): Promise<void> {
    running.stopping = true;
    signalSession(running, 'SIGTERM');
    const killer = setTimeout(() => signalSession(running, 'SIGKILL'), this.#config.PROCESS_STOP_GRACE_MS);
    await running.ended;
    clearTimeout(killer);
  }

  #output(process: Running, stream: 'stdout' | 'stderr', text: string): void {
    const lines = (process.partial[stream] + text).split('\n');
    process.partial[stream] = lines.pop()!;
    for (const line of lines) this.#keep(process, stream, line);
  }

  #keep(process: Running, stream: 'stdout' | 'stderr', line: string): void {
    process.logs.push(`${stream === 'stderr' ? '[stderr] ' : ''}${line.slice(0, MAX_LINE)}`);
    if (process.logs.length > this.#config.PROCESS_LOG_LINES) process.logs.splice(0, process.logs.length - this.#config.PROCESS_LOG_LINES);
  }

  async #ended(id: string, process: Running, code: number | null, signal: NodeJS.Signals | null, startError: string | null): Promise<void> {
    for (const stream of ['stdout', 'stderr'] as const) if (process.partial[stream]) this.#keep(process, stream, process.partial[stream]);
    process.partial = { stdout: '', stderr: '' };
    const status: ProcessStatus = process.stopping ? 'stopped' : code === 0 ? 'exited' : 'failed';
    this.#running.delete(id);
    await this.#db
      .forkEm(process.subscriptionId)
      .execute(
        // Unless the recovery job ended it first (it took this node for dead).
        `update process_executor_instance set status = ?, exit_code = ?, signal = ?, error = ?, logs = ?::jsonb, ended_at = now(), lease_until = null
         where subscription_id = ? and id = ? and status = 'running'`,
        [status, code, signal, startError, JSON.stringify(process.logs), process.subscriptionId, id],
      )
      .catch((err) => this.#logger.error({ err, processId: id }, 'could not record the end of a process'));
  }

  /** A process of the caller's subscription that runs on this node. */
  async #local(ctx: AuthenticatedContext, id: string): Promise<Running> {
    const instance = await this.#find(ctx, id);
    const running = this.#running.get(id);
    if (running) return running;
    if (instance.status === 'running') throw conflict(`Process ${id} runs on another node; ask that node`);
    throw conflict(`Process ${id} has ended (${instance.status})`);
  }

  async #find(ctx: AuthenticatedContext, id: string): Promise<ProcessInstance> {
    const instance = await ctx.em.findOne(ProcessInstance, { id }, { refresh: true });
    if (!instance) throw new RpcError('NOT_FOUND', `Process ${id} not found`);
    return instance;
  }
}

/** Whether this node may execute the file (else spawning it fails with the reason, as `error`). */
const executable = (file: string): Promise<boolean> =>
  access(file, constants.X_OK).then(
    () => true,
    () => false,
  );

/** Signals a process's session (it leads its own: `detached`), so what it started gets the signal too. */
function signalSession(running: Running, signal: NodeJS.Signals): void {
  if (running.child.pid === undefined) return;
  try {
    process.kill(-running.child.pid, signal);
  } catch {
    // Every process of the session has ended.
  }
}

const pending = (running: Running): string[] =>
  (['stdout', 'stderr'] as const)
    .filter((stream) => running.partial[stream])
    .map((stream) => `${stream === 'stderr' ? '[stderr] ' : ''}${running.partial[stream].slice(0, MAX_LINE)}`);
