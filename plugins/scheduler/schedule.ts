import { Cron } from 'croner';

/** A task's schedule: a cron pattern (in its time zone, UTC by default), or `once:` and an ISO 8601 UTC time. */
export type Schedule = { kind: 'cron'; cron: Cron } | { kind: 'once'; at: Date };

const ONCE = 'once:';
/** An ISO 8601 time in UTC: `Z` or a zero offset. */
const UTC_TIME = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}(:\d{2}(\.\d{1,3})?)?(Z|[+-]00:?00)$/;

/** Why a schedule or time zone is refused, as a message; undefined when both are good. */
export function scheduleProblem(schedule: string, timeZone: string | null): { path: 'schedule' | 'timeZone'; message: string } | undefined {
  if (timeZone !== null && !isTimeZone(timeZone)) return { path: 'timeZone', message: `${timeZone} is not an IANA time zone (such as Europe/Lisbon)` };
  try {
    parseSchedule(schedule, timeZone);
    return undefined;
  } catch (error) {
    return { path: 'schedule', message: (error as Error).message };
  }
}

export function parseSchedule(schedule: string, timeZone: string | null): Schedule {
  if (schedule.startsWith(ONCE)) {
    const text = schedule.slice(ONCE.length);
    const at = new Date(text);
    if (!UTC_TIME.test(text) || Number.isNaN(at.getTime())) throw new Error(`${schedule} is not once:<ISO 8601 UTC time>, such as once:2027-01-31T09:00:00Z`);
    return { kind: 'once', at };
  }
  try {
    return { kind: 'cron', cron: new Cron(schedule, { paused: true, ...(timeZone ? { timezone: timeZone } : {}) }) };
  } catch (error) {
    throw new Error(`${schedule} is not a cron pattern: ${(error as Error).message.replace(/^CronPattern: /, '')}`, { cause: error });
  }
}

/**
 * When a task fires next, after `after`: the pattern's next time; for a
 * `once:` task its time until it has fired (`firedAt` set), then never.
 */
export function nextRunOf(schedule: Schedule, after: Date, firedAt: Date | null): Date | null {
  if (schedule.kind === 'once') return firedAt && firedAt >= schedule.at ? null : schedule.at;
  return schedule.cron.nextRun(after);
}

function isTimeZone(name: string): boolean {
  try {
    new Intl.DateTimeFormat('en', { timeZone: name });
    return true;
  } catch {
    return false;
  }
}
