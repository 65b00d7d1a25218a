import path from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import type { MessagePort } from 'node:worker_threads';
import { Piscina } from 'piscina';
import type { Logger } from '../logger.ts';

/** Tasks that talk to the host a thread runs at once: most of their time they wait for its answers. */
const CONVERSATIONS_PER_THREAD = 16;
const WORKERS_DIR = fileURLToPath(new URL('../../workers/', import.meta.url));

/** A task that failed inside a worker thread; the dispatcher answers it as INTERNAL with an error id. */
export class WorkerTaskError extends Error {
  constructor(worker: string, cause: unknown) {
    super(`Worker task "${worker}" failed: ${(cause as Error)?.message ?? String(cause)}`, { cause });
    this.name = 'WorkerTaskError';
  }
}

/**
 * The pool for CPU-heavy work (embeddings, git, workflow interpretation).
 * Workers are plain modules whose default export takes plain data and returns
 * plain data: `workers/<name>.ts`, or a plugin's own file given by absolute path.
 */
export class WorkerPool {
  readonly #piscina: Piscina;
  readonly #conversations: Piscina;
  readonly #logger: Logger;

  constructor({ size, logger }: { size: number; logger: Logger }) {
    this.#logger = logger;
    // Threads start on first use and end when idle, so an idle service holds none.
    this.#piscina = new Piscina({ minThreads: 0, maxThreads: size, idleTimeout: 30_000 });
    // Tasks that wait for the host (a workflow asking for an effect) run on threads of their own, several at once,
    // so that they never hold a thread CPU-bound work is waiting for.
    this.#conversations = new Piscina({ minThreads: 0, maxThreads: size, idleTimeout: 30_000, concurrentTasksPerWorker: CONVERSATIONS_PER_THREAD });
  }

  get size(): number {
    return this.#piscina.options.maxThreads;
  }

  /**
   * Runs a worker's default export on `data`. With `port`, a MessagePort
   * moved to the task, the task talks to the host while it runs and goes to
   * the threads kept for such tasks.
   */
  async run<T>(worker: string, data: unknown, { port }: { port?: MessagePort } = {}): Promise<T> {
    const file = path.isAbsolute(worker) ? worker : path.join(WORKERS_DIR, `${worker}.ts`);
    try {
      const filename = pathToFileURL(file).href;
      return (await (port ? this.#conversations.run(data, { filename, transferList: [port] as never }) : this.#piscina.run(data, { filename }))) as T;
    } catch (error) {
      throw new WorkerTaskError(worker, error);
    }
  }

  /** Lets running tasks finish, then stops the threads. */
  async close(): Promise<void> {
    await Promise.all([this.#piscina.close(), this.#conversations.close()]);
    this.#logger.debug('worker pool drained');
  }
}
