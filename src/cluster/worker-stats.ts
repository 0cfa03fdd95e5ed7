/**
 * A workers' primary's `/perseid/stats`: its workers' figures as one, as its
 * `/metrics` and dashboard cover the machine. Counters and gauges are summed
 * over the workers (the queue depth each saw of the shared jobs queue is not:
 * the largest), sections that list things (live queries) are joined with each
 * entry's worker, and the jobs sections are merged (jobs-metrics.ts).
 */
import { jobsMetrics, mergeJobsSections, type JobsSection } from '../jobs/jobs-metrics.js';

/** Gauges of state the workers share, each as one worker last saw it. */
const SHARED = new Set([jobsMetrics.queued.name]);

export function mergeWorkerStats(workers: ReadonlyArray<{ id: number; stats: Record<string, unknown> }>): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  const jobs: JobsSection[] = [];
  for (const { id, stats } of workers) {
    for (const [name, value] of Object.entries(stats)) {
      if (typeof value === 'number') {
        const sum = (out[name] as number | undefined) ?? 0;
        out[name] = SHARED.has(name) ? Math.max(sum, value) : sum + value;
      } else if (name === 'jobs') {
        jobs.push(value as JobsSection);
      } else if (Array.isArray(value)) {
        out[name] = [...((out[name] as unknown[] | undefined) ?? []), ...value.map((entry: Record<string, unknown>) => ({ worker: id, ...entry }))];
      }
    }
  }
  if (jobs.length) out.jobs = mergeJobsSections(jobs);
  return out;
}
