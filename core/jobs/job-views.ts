/**
 * How pg-boss's job rows read as the service's views of a job: its states
 * named as ours, attempts, the last error, times. Shared by the plugins' view
 * (core/jobs/job-service.ts), a subscription's (JobQueue) and the operator's.
 */

export type JobState = 'waiting' | 'retrying' | 'running' | 'done' | 'dead' | 'cancelled';

export interface JobView {
  id: string;
  name: string;
  state: JobState;
  data: unknown;
  /** Attempts started so far. */
  attempts: number;
  /** The last failure's message, while retrying and once dead. */
  lastError: string | null;
  output: unknown;
  runAt: string;
  createdAt: string;
  startedAt: string | null;
  finishedAt: string | null;
}

/** A job as its subscription's admins see it: what, when and how it went, never its data or output. */
export interface SubscriptionJob {
  id: string;
  queue: string;
  state: JobState;
  attempts: number;
  lastError: string | null;
  runAt: string;
  createdAt: string;
  startedAt: string | null;
  finishedAt: string | null;
}

/** Our name of each of pg-boss's states. */
export const STATES: Record<string, JobState> = {
  created: 'waiting',
  retry: 'retrying',
  active: 'running',
  completed: 'done',
  failed: 'dead',
  cancelled: 'cancelled',
};

/** A queue's jobs by state. */
export interface QueueCounts {
  queue: string;
  states: Record<JobState, number>;
}

/** A dead job as an operator sees it: never its data. */
export interface FailedJob {
  id: string;
  queue: string;
  failedAt: string;
  error: string | null;
}

export const emptyCounts = (): Record<JobState, number> => ({ waiting: 0, retrying: 0, running: 0, done: 0, dead: 0, cancelled: 0 });

/** Counted rows (pg-boss states) as counts per queue in name order, with zeros for each of `queues` without a row. */
export function countsByQueue(rows: readonly { name: string; state: string; count: number }[], queues: readonly string[]): QueueCounts[] {
  const counts = new Map(queues.map((queue) => [queue, emptyCounts()]));
  for (const row of rows) {
    const queue = counts.get(row.name) ?? counts.set(row.name, emptyCounts()).get(row.name)!;
    queue[STATES[row.state] ?? 'waiting'] += row.count;
  }
  return [...counts].sort(([a], [b]) => a.localeCompare(b)).map(([queue, states]) => ({ queue, states }));
}

/** pg-boss's state of each of ours. */
export const BOSS_STATES = Object.fromEntries(Object.entries(STATES).map(([boss, ours]) => [ours, boss])) as Record<JobState, string>;

export interface JobRow {
  id: string;
  name: string;
  state: string;
  retry_count: number;
  start_after: Date | string;
  created_on: Date | string;
  started_on: Date | string | null;
  completed_on: Date | string | null;
  output: unknown;
}

/** Our state of a pg-boss job, the attempts it has started and the last failure's message while retrying and once dead. */
export function progressOf(
  bossState: string,
  retryCount: number,
  startedOn: unknown,
  output: unknown,
): { state: JobState; attempts: number; lastError: string | null } {
  const state = STATES[bossState] ?? 'waiting';
  const failed = state === 'retrying' || state === 'dead';
  return { state, attempts: startedOn ? retryCount + 1 : retryCount, lastError: failed ? lastErrorOf(output) : null };
}

export function subscriptionJobOf(row: JobRow): SubscriptionJob {
  return {
    id: row.id,
    queue: row.name,
    ...progressOf(row.state, row.retry_count, row.started_on, row.output),
    runAt: iso(row.start_after)!,
    createdAt: iso(row.created_on)!,
    startedAt: iso(row.started_on),
    finishedAt: iso(row.completed_on),
  };
}

export const iso = (value: Date | string | null | undefined): string | null => (value ? new Date(value).toISOString() : null);

export function lastErrorOf(output: unknown): string | null {
  if (!output || typeof output !== 'object') return null;
  const record = output as { message?: unknown; value?: unknown };
  if (typeof record.message === 'string') return record.message;
  if (typeof record.value === 'string') return record.value;
  if (record.value && typeof record.value === 'object') return lastErrorOf(record.value);
  return null;
}
