/** What an app defines: each job's function and options, checked once when defined. */
import type { JobFunction } from './attempt.js';
import { JobErrors } from './errors.js';
import type { Schedule } from './schedule.js';

export interface JobOptions {
  /** Longest one attempt may take before it counts as failed, in ms (default 600000). */
  timeoutMs?: number;
  /** Attempts after the first when one fails, times out, or its runner dies (default 1). */
  retries?: number;
  /** Wait before the first retry, in ms, doubled for each later one (default 1000). */
  retryDelayMs?: number;
  /**
   * Whether runs of this job may run at the same time, anywhere in the cluster.
   * Default false for scheduled jobs (a due run finding the previous one still
   * running is recorded as skipped, a retry waits) and true for queued ones
   * (a queued run waits for the running one).
   */
  overlap?: boolean;
  /** For scheduled runs: higher runs first when several are due (default 0). */
  priority?: number;
}

export interface ScheduleOptions extends JobOptions {
  /** IANA time zone the cron expression is read in (default UTC, whatever the process's own zone). */
  timezone?: string;
}

export interface JobDefinition {
  name: string;
  fn: JobFunction;
  timeoutMs: number;
  retries: number;
  retryDelayMs: number;
  overlap: boolean;
  priority: number;
  schedule?: Schedule;
  /**
   * The definition as a line (`every 60000 ms, timeoutMs 600000, retries 1, retryDelayMs 1000, overlap false`), kept
   * in each run it queues: processes of two versions that define the job otherwise can tell.
   */
  text: string;
}

const NAME = /^[\w.:-]{1,100}$/;

function count(name: string, key: string, value: unknown, fallback: number, min: number, max: number): number {
  if (value === undefined) return fallback;
  if (typeof value !== 'number' || !Number.isInteger(value) || value < min || value > max) {
    throw JobErrors.badOptions({ name, problem: `${key} must be a whole number from ${min} to ${max} (got ${JSON.stringify(value)})` });
  }
  return value;
}

const JOB_OPTIONS = ['timeoutMs', 'retries', 'retryDelayMs', 'overlap', 'priority'];

/**
 * The options object of `define` or `schedule`, checked for names it does not know: a misspelt one (Intl's `timeZone`
 * for `timezone`) was dropped without a word, and the job ran with the default (in UTC).
 */
export function checkOptionNames<T extends object>(name: string, options: T, scheduled: boolean): T {
  if (typeof options !== 'object' || options === null || Array.isArray(options)) throw JobErrors.badOptions({ name: String(name), problem: 'options must be an object' });
  const known = scheduled ? [...JOB_OPTIONS, 'timezone'] : JOB_OPTIONS;
  const unknown = Object.keys(options).find((key) => !known.includes(key));
  if (unknown !== undefined) {
    const hint = !scheduled && unknown === 'timezone' ? ' (timezone is for scheduled jobs)' : '';
    throw JobErrors.badOptions({ name: String(name), problem: `unknown option ${JSON.stringify(unknown)}${hint}; the options are ${known.join(', ')}` });
  }
  return options;
}

export function defineJob(name: string, fn: JobFunction, options: JobOptions, schedule: Schedule | undefined): JobDefinition {
  if (typeof name !== 'string' || !NAME.test(name)) {
    throw JobErrors.badOptions({ name: String(name), problem: 'a job name is 1 to 100 letters, digits, and . _ : -' });
  }
  if (typeof fn !== 'function') throw JobErrors.badOptions({ name, problem: 'the job needs a function' });
  checkOptionNames(name, options, schedule !== undefined);
  if (options.overlap !== undefined && typeof options.overlap !== 'boolean') throw JobErrors.badOptions({ name, problem: 'overlap must be true or false' });
  const timeoutMs = count(name, 'timeoutMs', options.timeoutMs, 600_000, 1, 2 ** 31 - 1);
  const retries = count(name, 'retries', options.retries, 1, 0, 1000);
  const retryDelayMs = count(name, 'retryDelayMs', options.retryDelayMs, 1000, 0, 86_400_000);
  const overlap = options.overlap ?? schedule === undefined;
  const text = `${schedule ? `${schedule.text}, ` : ''}timeoutMs ${timeoutMs}, retries ${retries}, retryDelayMs ${retryDelayMs}, overlap ${overlap}`;
  return { name, fn, timeoutMs, retries, retryDelayMs, overlap, priority: count(name, 'priority', options.priority, 0, -1e6, 1e6), schedule, text };
}
