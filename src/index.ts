/** perseid: the server. */
export { createServer, PerseidServer, DEFAULT_COMPRESSION, type ServerOptions, type ServerRole } from './server/app.js';
export type { MethodHandler } from './server/method-invocation.js';
export type { DispatchEvent, DispatchHook } from './server/dispatch-hooks.js';
export { MethodInvocation } from './server/method-invocation.js';
export { Subscription, type PublishHandler } from './server/subscription.js';
export type { ConnectionHandle } from './server/connection-handle.js';
export type { PublicationStrategy } from './server/merge-box.js';
export { Collection, type CollectionOptions, type UpsertResult } from './collections/collection.js';
export { Cursor, type ObserveCallbacks, type ObserveChangesCallbacks } from './collections/cursor.js';
export { Database, openDatabase, setDefaultDatabase, getDefaultDatabase, clearDefaultDatabase, type DatabaseOptions } from './collections/database.js';
export { DuplicateKeyError, type StorageDriver, type CollectionDriver } from './data/driver.js';
export type { Document, FindOptions, Selector, SortSpecifier, Projection, IndexKeys, IndexOptions } from './data/types.js';
export type { ChangeSource, ChangeEvent } from './data/change-source.js';
export { EJSON, type EJSONCustomType } from './ddp/ejson.js';
export { DDPError } from './ddp/errors.js';
export { ObjectID } from './ddp/object-id.js';
export { Random, collectionIdSequence } from './ddp/random.js';
export { Jobs, JobError, JOBS_COLLECTION, type EnqueueOptions, type JobsStartOptions, type JobContext, type JobFunction, type JobOptions, type ScheduleOptions, type JobRun, type AttemptRecord, type RunStatus } from './jobs/index.js';
export { metrics } from './metrics/registry.js';
export { createLogger, setLogLevel, type Logger, type LogLevel } from './log.js';
export {
  rateLimiter,
  RateLimiter,
  MemoryRateLimitStore,
  RedisRateLimitStore,
  type RateLimiterSetup,
  type RateLimitInput,
  type RateLimitMatcher,
  type RateLimitReply,
  type RateLimitStore,
} from './rate-limit/index.js';
export { validated, validate, implement, check, Match, MatchError, type Pattern } from './validation/index.js';
export { defineMethod, definePublication, returns } from './contract/index.js';
export type { MethodDefinition, PublicationDefinition, InputsOf, OutputsOf, ResultOf, Returns } from './contract/index.js';
