import path from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { Piscina } from 'piscina';
import type { Logger } from '../logger.ts';

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
  readonly #logger: Logger;

  constructor({ size, logger }: { size: number; logger: Logger }) {
    this.#logger = logger;
    // Threads start on first use and end when idle, so an idle service holds none.
    this.#piscina = new Piscina({ minThreads: 0, maxThreads: size, idleTimeout: 30_000 });
  }

  get size(): number {
    return this.#piscina.options.maxThreads;
  }

  async run<T>(worker: string, data: unknown): Promise<T> {
    const file = path.isAbsolute(worker) ? worker : path.join(WORKERS_DIR, `${worker}.ts`);
    try {
      return (await this.#piscina.run(data, { filename: pathToFileURL(file).href })) as T;
    } catch (error) {
      throw new WorkerTaskError(worker, error);
    }
  }

  /** Lets running tasks finish, then stops the threads. */
  async close(): Promise<void> {
    await this.#piscina.close();
    this.#logger.debug('worker pool drained');
  }
}
