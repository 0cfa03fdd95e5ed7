/** The jobs layer's public surface: what `server.jobs` is, and the shapes apps meet. */
export { Jobs, type EnqueueOptions, type JobsStartOptions } from './jobs.js';
export type { JobContext, JobFunction } from './attempt.js';
export type { JobOptions, ScheduleOptions } from './definitions.js';
export { JobError } from './errors.js';
export { JOBS_COLLECTION, type AttemptRecord, type JobRun, type RunStatus } from './history.js';
