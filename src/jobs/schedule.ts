/**
 * When a scheduled job is due, as a pure function of time: a cron expression
 * (five fields, or six with seconds first, read by `croner`, in a time zone)
 * or a fixed interval. No timers here. Every process computes the same due
 * times, since they depend on the expression alone, never on when a process
 * started or what its clock said at its last run: a run's identity is
 * (job, due time), and that is what keeps two processes with skewed clocks
 * from both running it (synced-cron derived it from each host's own clock).
 */
import { inspect } from 'node:util';
import { Cron } from 'croner';
import { JobErrors } from './errors.js';

export interface Schedule {
  /** How it was given, for logs and the stats page: `cron "*\/5 * * * *" Europe/Paris` or `every 60000 ms`. */
  readonly text: string;
  /** The first due time strictly after `after`, or undefined when there is none (a cron that never fires again). */
  next(after: Date): Date | undefined;
}

/** The shortest interval accepted; below it a job would run more often than a lease could be renewed. */
export const MIN_INTERVAL_MS = 100;

class CronSchedule implements Schedule {
  readonly text: string;
  private readonly cron: Cron;

  constructor(expression: string, timezone: string | undefined) {
    try {
      // UTC unless told: every process must read the expression alike, whatever its own zone.
      this.cron = new Cron(expression, { paused: true, mode: '5-or-6-parts', timezone: timezone ?? 'Etc/UTC' });
    } catch (error) {
      throw JobErrors.badSchedule({ schedule: JSON.stringify(expression), problem: (error as Error).message });
    }
    this.text = `cron ${JSON.stringify(expression)}${timezone ? ` ${timezone}` : ''}`;
  }

  next(after: Date): Date | undefined {
    return this.cron.nextRun(after) ?? undefined;
  }
}

/** Every `ms`, on the multiples of `ms` since the epoch: the same instants in every process, whenever each started. */
class IntervalSchedule implements Schedule {
  readonly text: string;

  constructor(private readonly ms: number) {
    this.text = `every ${ms} ms`;
  }

  next(after: Date): Date {
    return new Date((Math.floor(after.getTime() / this.ms) + 1) * this.ms);
  }
}

/** Reads a schedule: a cron string, or an interval in milliseconds. Throws JOB_BAD_SCHEDULE. */
export function parseSchedule(when: string | number, timezone?: string): Schedule {
  if (typeof when === 'number') {
    if (!Number.isInteger(when) || when < MIN_INTERVAL_MS) {
      throw JobErrors.badSchedule({ schedule: String(when), problem: `an interval must be a whole number of milliseconds, at least ${MIN_INTERVAL_MS}` });
    }
    if (timezone !== undefined) throw JobErrors.badSchedule({ schedule: String(when), problem: 'a time zone applies only to cron expressions' });
    return new IntervalSchedule(when);
  }
  if (typeof when !== 'string' || when.trim() === '') {
    // JSON has no text for a function (the arguments swapped) nor undefined: the message named "{schedule}".
    const shown = typeof when === 'string' ? JSON.stringify(when) : typeof when === 'function' ? '(a function)' : inspect(when);
    throw JobErrors.badSchedule({ schedule: shown, problem: 'give a cron expression (string) or an interval in milliseconds (number)' });
  }
  // croner's own message offers seven fields, which this mode refuses.
  const fields = when.trim().split(/\s+/).length;
  if (fields !== 5 && fields !== 6 && !when.trim().startsWith('@')) {
    throw JobErrors.badSchedule({ schedule: JSON.stringify(when), problem: `a cron expression has five fields, or six with seconds first (got ${fields}); an interval is a number of milliseconds` });
  }
  if (timezone !== undefined) {
    try {
      new Intl.DateTimeFormat('en', { timeZone: timezone });
    } catch {
      throw JobErrors.badSchedule({ schedule: JSON.stringify(when), problem: `unknown time zone ${JSON.stringify(timezone)} (use an IANA name such as Europe/Paris)` });
    }
  }
  const cron = new CronSchedule(when.trim(), timezone);
  // Without a year field, an expression that has no next time has none ever: its job would never run.
  if (!cron.next(new Date())) throw JobErrors.badSchedule({ schedule: JSON.stringify(when), problem: 'it never falls due (a date that does not exist, such as 31 April)' });
  return cron;
}
