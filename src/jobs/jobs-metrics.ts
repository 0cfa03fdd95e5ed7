/**
 * What the jobs layer counts, for /perseid/stats and the APM: runs started,
 * ended by outcome, skipped, taken over from lost runners, refused results,
 * the queue's depth, and a `jobs` section with each schedule's next run and
 * the latest runs this process finished.
 */
import { apm } from '../metrics/apm.js';
import { metrics } from '../metrics/registry.js';

export const jobsMetrics = {
  started: metrics.counter('perseid_jobs_started_total', 'Job attempts started by this process'),
  succeeded: metrics.counter('perseid_jobs_succeeded_total', 'Job runs this process finished successfully'),
  failed: metrics.counter('perseid_jobs_failed_total', 'Job runs this process finished as failed (no retries left)'),
  retried: metrics.counter('perseid_jobs_retried_total', 'Failed job attempts this process queued again for a retry'),
  skipped: metrics.counter('perseid_jobs_skipped_total', 'Scheduled runs skipped because the previous run of a no-overlap job was still running'),
  takenOver: metrics.counter('perseid_jobs_taken_over_total', 'Runs this process took back from a runner that lost its lease (requeued or failed)'),
  refused: metrics.counter('perseid_jobs_results_refused_total', 'Results this process could not record because its lease had been taken over'),
  duration: metrics.counter('perseid_jobs_duration_seconds_total', 'Time spent in job attempts this process finished'),
  /** The same by job, for alerts on one job: `perseid_jobs_failed_total` says only that some job failed. */
  runsByJob: metrics.labelledCounter('perseid_job_runs_total', 'Job attempts this process finished, by job and outcome (succeeded, failed, retrying)', ['job', 'outcome']),
  durationByJob: metrics.labelledCounter('perseid_job_duration_seconds_total', 'Time spent in job attempts this process finished, by job', ['job']),
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
  jobsMetrics.duration.inc(run.durationMs / 1000);
  jobsMetrics.runsByJob.inc({ job: run.job, outcome: run.status });
  jobsMetrics.durationByJob.inc({ job: run.job }, run.durationMs / 1000);
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

/** Several processes' jobs sections as one (a workers' primary's): each schedule's earliest next run, and the latest runs of them all. */
export function mergeJobsSections(sections: readonly JobsSection[]): Omit<JobsSection, 'runner'> & { runners: string[] } {
  const schedules = new Map<string, JobsSection['schedules'][number]>();
  for (const s of sections.flatMap((section) => section.schedules)) {
    const known = schedules.get(s.job);
    if (!known || (s.nextRunAt !== undefined && (known.nextRunAt === undefined || s.nextRunAt < known.nextRunAt))) schedules.set(s.job, s);
  }
  return {
    role: sections[0]?.role ?? 'all',
    runners: sections.flatMap((section) => (section.runner === undefined ? [] : [section.runner])),
    schedules: [...schedules.values()],
    // Read back from JSON, a date is its ISO text: new Date() takes either.
    recent: sections
      .flatMap((section) => section.recent)
      .sort((a, b) => new Date(b.finishedAt).getTime() - new Date(a.finishedAt).getTime())
      .slice(0, RECENT),
  };
}

/** One job's line on the dashboard, from the durable history (every process's runs, not only this one's). */
export interface JobSummary {
  job: string;
  runs: number;
  succeeded: number;
  failed: number;
  running: number;
  queued: number;
  /** Mean duration of the finished runs read, ms. */
  avgMs: number | null;
  lastFinishedAt?: string;
  nextRunAt?: string;
  /** The latest failed run's error and when it ended: a job failing now and then has runs that succeeded since. */
  lastError?: string;
  lastFailedAt?: string;
}

interface RunLike {
  job: string;
  status: string;
  runAt: Date;
  finishedAt?: Date;
  durationMs?: number;
  error?: string;
}

/** Per job: runs by status, mean duration, last finish, last failure and its error, next run (the earliest queued run or the schedule's). */
export function summarizeRuns(runs: readonly RunLike[], schedules: ReadonlyArray<{ job: string; nextRunAt?: string }>): JobSummary[] {
  const byJob = new Map<string, JobSummary & { durations: number }>();
  const row = (job: string) => {
    let r = byJob.get(job);
    if (!r) byJob.set(job, (r = { job, runs: 0, succeeded: 0, failed: 0, running: 0, queued: 0, avgMs: null, durations: 0 }));
    return r;
  };
  for (const run of runs) {
    const r = row(run.job);
    r.runs++;
    if (run.status === 'succeeded') r.succeeded++;
    else if (run.status === 'failed') r.failed++;
    else if (run.status === 'running') r.running++;
    else if (run.status === 'queued') {
      r.queued++;
      const at = new Date(run.runAt).toISOString();
      if (!r.nextRunAt || at < r.nextRunAt) r.nextRunAt = at;
    }
    if (run.durationMs !== undefined && (run.status === 'succeeded' || run.status === 'failed')) {
      r.avgMs = ((r.avgMs ?? 0) * r.durations + run.durationMs) / (r.durations + 1);
      r.durations++;
    }
    if (run.finishedAt) {
      const at = new Date(run.finishedAt).toISOString();
      if (!r.lastFinishedAt || at > r.lastFinishedAt) r.lastFinishedAt = at;
      if (run.status === 'failed' && (!r.lastFailedAt || at > r.lastFailedAt)) {
        r.lastFailedAt = at;
        r.lastError = run.error ?? '';
      }
    }
  }
  for (const s of schedules) {
    const r = row(s.job);
    if (s.nextRunAt && (!r.nextRunAt || s.nextRunAt < r.nextRunAt)) r.nextRunAt = s.nextRunAt;
  }
  return [...byJob.values()].map(({ durations: _, ...r }) => r).sort((a, b) => a.job.localeCompare(b.job));
}

/** Runs read for the dashboard's summary, per job (its newest). */
const SUMMARY_RUNS = 100;

/** Shows the jobs on the APM dashboard, from `recent` (each job's latest runs in the durable history) and this process's schedules. */
export function showJobsOnDashboard(recent: (limit: number) => Promise<RunLike[]>, schedules: () => Array<{ job: string; nextRunAt?: string }>, runner: string): void {
  apm.jobsFrom(async () => ({ runner, jobs: summarizeRuns(await recent(SUMMARY_RUNS), schedules()) }));
}

export function hideJobsOnDashboard(): void {
  apm.jobsFrom(undefined);
}
