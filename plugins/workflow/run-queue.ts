import { RpcError } from 'rpc-service/plugin';
import type { WorkflowConfig } from './config.ts';

/** What the line holds to, per process: the pool's threads for runs, and the caps per subscription and per user. */
interface RunCaps {
  threads: number;
  runningPerSubscription: number;
  runningPerUser: number;
  queuedPerSubscription: number;
  queuedPerUser: number;
}

/** A part of a run's place: `turn` settles when it may take a thread (true when it had to wait for it); `leave` gives the place back. */
export interface RunTicket {
  readonly turn: Promise<boolean>;
  leave(): void;
}

interface Waiter {
  start(): void;
}
interface UserLine {
  running: number;
  waiting: Waiter[];
}
interface SubscriptionLine {
  running: number;
  queued: number;
  users: Map<string, UserLine>;
}

/**
 * The line parts of workflow runs wait in for a thread of the worker pool.
 * A subscription runs at most `runningPerSubscription` parts at once, never
 * all the threads (one is always left to the others), and each of its users
 * at most `runningPerUser`; a freed thread goes to the subscriptions in turn,
 * and within one to its users in turn, each user's parts first come first
 * served. A member looping long runs therefore waits behind itself only.
 */
export class RunQueue {
  readonly #caps: RunCaps;
  /** Subscriptions with parts running or waiting, in the order their turn comes (the one just served goes last). */
  readonly #lines = new Map<string, SubscriptionLine>();
  #running = 0;
  /** Places executeWorkflow took for new runs (by run id), until their first part takes them up. */
  readonly #held = new Map<string, RunTicket>();

  constructor(threads: number, config: WorkflowConfig) {
    const perSubscription = Math.max(1, Math.min(config.WORKFLOW_RUNNING_PER_SUBSCRIPTION, threads - 1));
    this.#caps = {
      threads,
      runningPerSubscription: perSubscription,
      runningPerUser: Math.min(config.WORKFLOW_RUNNING_PER_USER, perSubscription),
      queuedPerSubscription: config.WORKFLOW_QUEUED_PER_SUBSCRIPTION,
      queuedPerUser: config.WORKFLOW_QUEUED_PER_USER,
    };
  }

  /** Keeps a new run's place (from `enter`) for its first part. */
  hold(runId: string, ticket: RunTicket): void {
    this.#held.set(runId, ticket);
  }

  /** The place of a part of the run: the one held for it, else a new one (never refused). */
  placeOf(run: { id: string; subscriptionId: string; userId: string }): RunTicket {
    const held = this.#held.get(run.id);
    this.#held.delete(run.id);
    return held ?? this.enter(run.subscriptionId, run.userId);
  }

  /** Gives back the place held for a run whose first part never took it up. */
  release(runId: string): void {
    this.#held.get(runId)?.leave();
    this.#held.delete(runId);
  }

  /**
   * A place for a part of the user's run. With `refuseWhenFull` (a new run),
   * RATE_LIMITED when it would wait and the user's or subscription's line is
   * full; parts of runs already under way (resumed, taken over) always get one.
   */
  enter(subscriptionId: string, userId: string, { refuseWhenFull = false } = {}): RunTicket {
    const line = this.#lines.get(subscriptionId) ?? { running: 0, queued: 0, users: new Map<string, UserLine>() };
    const user = line.users.get(userId) ?? { running: 0, waiting: [] };
    if (refuseWhenFull && !this.#startable(line, user)) {
      if (user.waiting.length >= this.#caps.queuedPerUser)
        throw new RpcError(
          'RATE_LIMITED',
          `${user.waiting.length} runs of yours wait for a thread already (WORKFLOW_QUEUED_PER_USER); try again when one has ended`,
          {
            retryAfter: 1,
          },
        );
      if (line.queued >= this.#caps.queuedPerSubscription)
        throw new RpcError(
          'RATE_LIMITED',
          `${line.queued} runs of this subscription wait for a thread already (WORKFLOW_QUEUED_PER_SUBSCRIPTION); try again when one has ended`,
          { retryAfter: 1 },
        );
    }
    this.#lines.set(subscriptionId, line);
    line.users.set(userId, user);
    let state: 'waiting' | 'running' | 'left' = 'waiting';
    let started!: () => void;
    const begun = new Promise<void>((resolve) => (started = resolve));
    const waiter: Waiter = {
      start: () => {
        state = 'running';
        line.queued--;
        line.running++;
        user.running++;
        this.#running++;
        started();
      },
    };
    user.waiting.push(waiter);
    line.queued++;
    this.#dispatch();
    const waited = state === 'waiting';
    return {
      turn: begun.then(() => waited),
      leave: () => {
        if (state === 'left') return;
        if (state === 'running') {
          line.running--;
          user.running--;
          this.#running--;
        } else {
          line.queued--;
          user.waiting.splice(user.waiting.indexOf(waiter), 1);
        }
        state = 'left';
        if (user.running === 0 && user.waiting.length === 0) line.users.delete(userId);
        if (line.users.size === 0) this.#lines.delete(subscriptionId);
        this.#dispatch();
      },
    };
  }

  #startable(line: SubscriptionLine, user: UserLine): boolean {
    return (
      user.waiting.length === 0 &&
      this.#running < this.#caps.threads &&
      line.running < this.#caps.runningPerSubscription &&
      user.running < this.#caps.runningPerUser
    );
  }

  /** Hands free threads out: the first subscription in turn with a user in turn who may run one more part. */
  #dispatch(): void {
    while (this.#running < this.#caps.threads) {
      const next = this.#next();
      if (!next) return;
      const [subscriptionId, line, userId, user] = next;
      // Served: last in the turn of the subscriptions, and its user last in the turn of its users.
      this.#lines.delete(subscriptionId);
      this.#lines.set(subscriptionId, line);
      line.users.delete(userId);
      line.users.set(userId, user);
      user.waiting.shift()!.start();
    }
  }

  #next(): [string, SubscriptionLine, string, UserLine] | undefined {
    for (const [subscriptionId, line] of this.#lines) {
      if (line.queued === 0 || line.running >= this.#caps.runningPerSubscription) continue;
      for (const [userId, user] of line.users) {
        if (user.waiting.length > 0 && user.running < this.#caps.runningPerUser) return [subscriptionId, line, userId, user];
      }
    }
    return undefined;
  }
}
