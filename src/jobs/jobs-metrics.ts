/**
 * What the jobs layer counts, for /perseid/stats and the APM: runs started,
 * ended by outcome, skipped, taken over from lost runners, refused results,
 * the queue's depth, and a `jobs` section with each schedule's next run and
 * the latest runs this process finished.
 */
import { metrics } from '../metrics/registry.js';

export const jobsMetrics = {
  started: metrics.counter('perseid_jobs_started_total', 'Job attempts started by this process'),
  succeeded: metrics.counter('perseid_jobs_succeeded_total', 'Job runs this process finished successfully'),
  failed: metrics.counter('perseid_jobs_failed_total', 'Job runs this process finished as failed (no retries left)'),
  retried: metrics.counter('perseid_jobs_retried_total', 'Failed job attempts this process queued again for a retry'),
  skipped: metrics.counter('perseid_jobs_skipped_total', 'Scheduled runs skipped because the previous run of a no-overlap job was still running'),
  takenOver: metrics.counter('perseid_jobs_taken_over_total', 'Runs this process took back from a runner that lost its lease (requeued or failed)'),
  refused: metrics.counter('perseid_jobs_results_refused_total', 'Results this process could not record because its lease had been taken over'),
  durationMs: metrics.counter('perseid_jobs_duration_ms_total', 'Time spent in job attempts this process finished, in ms'),
  running: metrics.gauge('perseid_jobs_running', 'Job attempts running in this process now'),
  queued: metrics.gauge('perseid_jobs_queued_due', 'Runs due and waiting in the queue, as of this process\'s last poll'),
};

export interface FinishedRun {
  job: string;
  run: string;
  status: 'succeeded' | 'failed' | 'retrying';
  attempt: number;
  durationMs: number;
  error?: string;
  runner: string;
  finishedAt: Date;
}

const RECENT = 20;
const recent: FinishedRun[] = [];

/** Counts a finished attempt and keeps it among the latest shown on the stats page. */
export function recordFinished(run: FinishedRun): void {
  if (run.status === 'succeeded') jobsMetrics.succeeded.inc();
  else if (run.status === 'failed') jobsMetrics.failed.inc();
  else jobsMetrics.retried.inc();
  jobsMetrics.durationMs.inc(run.durationMs);
  recent.unshift(run);
  if (recent.length > RECENT) recent.length = RECENT;
}

export interface JobsSection {
  role: string;
  runner?: string;
  schedules: Array<{ job: string; schedule: string; nextRunAt?: string }>;
  recent: FinishedRun[];
}

/** Publishes the `jobs` section of /perseid/stats, computed when read. */
export function showJobs(describe: () => Omit<JobsSection, 'recent'>): void {
  metrics.section('jobs', () => ({ ...describe(), recent }));
}

export function hideJobs(): void {
  metrics.removeSection('jobs');
}
