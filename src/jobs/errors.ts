/**
 * What the jobs API throws to app code, each defined once in the error
 * catalogue (docs/reference/errors.md). Failures of a job's own function are
 * not thrown anywhere: they are recorded in its run's history.
 */
import { defineThrownError, type CataloguedError } from '../ddp/errors.js';

/** An error of the jobs API; `code` is the catalogue's, e.g. `JOB_NOT_DEFINED`. */
export class JobError extends Error {
  constructor(
    readonly code: string,
    message: string,
  ) {
    super(message);
    this.name = 'JobError';
  }
}

function thrown(entry: CataloguedError): (values: Record<string, string>) => JobError {
  return (values) => new JobError(String(entry.code), entry.reason.replace(/\{(\w+)\}/g, (_m, key: string) => values[key] ?? `{${key}}`));
}

export const JobErrors = {
  notDefined: thrown(defineThrownError('JOB_NOT_DEFINED', 'JOB_NOT_DEFINED', "No job named '{name}': define it with server.jobs.define() or schedule() first")),
  alreadyDefined: thrown(defineThrownError('JOB_ALREADY_DEFINED', 'JOB_ALREADY_DEFINED', "A job named '{name}' is already defined")),
  badSchedule: thrown(defineThrownError('JOB_BAD_SCHEDULE', 'JOB_BAD_SCHEDULE', 'Cannot read the schedule {schedule}: {problem}')),
  badOptions: thrown(defineThrownError('JOB_BAD_OPTIONS', 'JOB_BAD_OPTIONS', "Job '{name}': {problem}")),
};

/** Recorded as a run's error when its time ran out (the function may still be running: JavaScript cannot stop it). */
export const timedOut = (ms: number): string => `timed out after ${ms} ms`;
/** Recorded when a run's runner stopped renewing its lease (it died or stalled) and another process took the run over. */
export const runnerLost = (runner: string): string => `runner ${runner} was lost (its lease expired) before the run finished`;
