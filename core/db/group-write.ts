interface Waiting<T> {
  item: T;
  written: () => void;
  failed: (error: unknown) => void;
}

/**
 * Group commit: many callers' writes sent as one statement. The first write
 * goes at once; those that arrive while it is under way wait for it and go
 * together in the next (at most `maxBatch`), so under load a caller waits
 * for about one write, not for a queue of them. Each caller's promise
 * resolves once its item is written and rejects when the statement that held
 * it failed: what waits on it (an audited read, a run's outcome) can rely on
 * it as on a write of its own.
 */
export class GroupWrite<T> {
  readonly #write: (items: T[]) => Promise<unknown>;
  readonly #maxBatch: number;
  #waiting: Waiting<T>[] = [];
  #writing = false;

  constructor(write: (items: T[]) => Promise<unknown>, { maxBatch = 500 }: { maxBatch?: number } = {}) {
    this.#write = write;
    this.#maxBatch = maxBatch;
  }

  add(item: T): Promise<void> {
    return new Promise((written, failed) => {
      this.#waiting.push({ item, written, failed });
      if (!this.#writing) void this.#writeWaiting();
    });
  }

  async #writeWaiting(): Promise<void> {
    this.#writing = true;
    while (this.#waiting.length > 0) {
      const batch = this.#waiting.splice(0, this.#maxBatch);
      try {
        await this.#write(batch.map((waiting) => waiting.item));
        for (const waiting of batch) waiting.written();
      } catch (error) {
        for (const waiting of batch) waiting.failed(error);
      }
    }
    this.#writing = false;
  }
}
