import path from 'node:path';
import { pathToFileURL } from 'node:url';
import type { MessagePort } from 'node:worker_threads';
import { Piscina } from 'piscina';
import { defaults } from '../../config/defaults.ts';
import type { Logger } from '../base/logger.ts';
import { modulePath, needsTypeScript } from '../base/paths.ts';

/**
 * Threads for tasks that talk to the host, per thread of CPU-bound work:
 * such a task spends most of its time waiting for the host's answers, and
 * holds its thread alone (see #conversationPool).
 */
const CONVERSATION_THREADS_PER_WORKER = 4;

/**
 * How a task failed: its code threw (`threw`); its caller stopped it, and
 * the thread with it (`stopped`: a time limit); or its thread died under it
 * (`lost`: out of memory, or stopped for another task it shared the thread with).
 */
export type WorkerFailure = 'threw' | 'stopped' | 'lost';

/** A task that failed inside a worker thread; the dispatcher answers it as INTERNAL with an error id. */
export class WorkerTaskError extends Error {
  readonly failure: WorkerFailure;
  /** What happened, without the worker's file: "the thread ran out of memory". */
  readonly reason: string;

  constructor(worker: string, failure: WorkerFailure, reason: string, cause: unknown) {
    super(`Worker task "${worker}" ${failure === 'threw' ? 'failed' : failure === 'stopped' ? 'was stopped' : 'lost its thread'}: ${reason}`, { cause });
    this.name = 'WorkerTaskError';
    this.failure = failure;
    this.reason = reason;
  }
}

export interface WorkerPoolOptions {
  size: number;
  /** Heap of each thread: a task that needs more loses its thread (replaced), never the process. */
  memoryMb?: number;
  /** A task still running after this long is stopped with its thread, unless its caller passes a signal of its own. */
  taskTimeoutMs?: number;
  /** Threads for tasks that talk to the host (`port`); CONVERSATION_THREADS_PER_WORKER × size by default. */
  conversationThreads?: number;
  logger: Logger;
}

/**
 * The pool for CPU-heavy work (embeddings, git, workflow interpretation).
 * Workers are plain modules whose default export takes plain data and returns
 * plain data: `workers/<name>.ts`, or a plugin's own file given by absolute path.
 */
export class WorkerPool {
  readonly #piscina: Piscina;
  #conversations: Piscina | undefined;
  readonly #conversationThreads: number;
  readonly #resourceLimits: { maxOldGenerationSizeMb: number };
  readonly #taskTimeoutMs: number;
  readonly #logger: Logger;

  constructor({
    size,
    memoryMb = defaults.workerMaxMemoryMb,
    taskTimeoutMs = defaults.workerTaskTimeoutMs,
    conversationThreads = size * CONVERSATION_THREADS_PER_WORKER,
    logger,
  }: WorkerPoolOptions) {
    this.#logger = logger;
    this.#taskTimeoutMs = taskTimeoutMs;
    this.#resourceLimits = { maxOldGenerationSizeMb: memoryMb };
    this.#conversationThreads = conversationThreads;
    // Threads start on first use and end when idle, so an idle service holds none.
    this.#piscina = new Piscina({ minThreads: 0, maxThreads: size, idleTimeout: 30_000, resourceLimits: this.#resourceLimits });
  }

  get size(): number {
    return this.#piscina.options.maxThreads;
  }

  /** How many tasks that talk to the host run at once; more wait in piscina's line, first come first served. */
  get conversationThreads(): number {
    return this.#conversationThreads;
  }

  /**
   * The threads of tasks that wait for the host (a workflow asking for an
   * effect), apart, so that they never hold a thread CPU-bound work is
   * waiting for; made on the first such task. Each task holds its thread
   * alone: every such task can be stopped (it has a signal), and piscina's
   * balancer hands a task that can be stopped only to an idle thread, as
   * stopping it ends the thread. All of them are kept started (minThreads),
   * and piscina starts another at once in place of one stopped: a task
   * stopped for its time costs the next task no wait for a new thread
   * (which takes seconds on a loaded machine).
   */
  #conversationPool(): Piscina {
    this.#conversations ??= new Piscina({
      minThreads: this.#conversationThreads,
      maxThreads: this.#conversationThreads,
      resourceLimits: this.#resourceLimits,
    });
    return this.#conversations;
  }

  /**
   * Runs a worker's default export on `data`. With `port`, a MessagePort
   * moved to the task, the task talks to the host while it runs and goes to
   * the threads kept for such tasks. `signal` stops the task and its thread
   * (its caller's own time limit); without it, WORKER_TASK_TIMEOUT_MS does.
   */
  async run<T>(worker: string, data: unknown, { port, signal }: { port?: MessagePort; signal?: AbortSignal } = {}): Promise<T> {
    const file = path.isAbsolute(worker) ? worker : modulePath(import.meta.url, `../../workers/${worker}.ts`);
    const stop = signal ?? AbortSignal.timeout(this.#taskTimeoutMs);
    try {
      const typeScript = needsTypeScript(file);
      const filename = pathToFileURL(typeScript ? modulePath(import.meta.url, './typescript-worker.ts') : file).href;
      const task = typeScript ? { file: pathToFileURL(file).href, data } : data;
      // piscina types transferList with its own Transferable, which Node's MessagePort is at run time but not by name.
      return (await (port
        ? this.#conversationPool().run(task, { filename, transferList: [port] as never, signal: stop })
        : this.#piscina.run(task, { filename, signal: stop }))) as T;
    } catch (error) {
      throw this.#failure(worker, error, stop);
    }
  }

  #failure(worker: string, error: unknown, stop: AbortSignal): WorkerTaskError {
    const { name, code, message } = (error ?? {}) as { name?: string; code?: string; message?: string };
    if (name === 'AbortError' && stop.aborted) {
      const reason = stop.reason instanceof Error && stop.reason.name !== 'TimeoutError' ? stop.reason.message : `ran longer than ${this.#taskTimeoutMs} ms`;
      this.#logger.warn({ worker, reason }, 'a worker task was stopped with its thread');
      return new WorkerTaskError(worker, 'stopped', reason, error);
    }
    if (code === 'ERR_WORKER_OUT_OF_MEMORY') {
      this.#logger.warn({ worker }, 'a worker thread ran out of memory and was replaced');
      return new WorkerTaskError(worker, 'lost', 'the thread ran out of memory', error);
    }
    if (message === 'Terminating worker thread' || message?.startsWith('worker exited with code')) {
      return new WorkerTaskError(worker, 'lost', 'the thread was stopped', error);
    }
    return new WorkerTaskError(worker, 'threw', message ?? String(error), error);
  }

  /** Lets running tasks finish, then stops the threads. */
  async close(): Promise<void> {
    await Promise.all([this.#piscina.close(), this.#conversations?.close()]);
    this.#logger.debug('worker pool drained');
  }
}
