/**
 * Rate limits with Meteor's DDPRateLimiter semantics. A rule is a matcher over
 * the event `{type, name, userId, connectionId, clientAddress}`: each of its
 * keys holds a literal (equal), a predicate (true for the event's value) or
 * null (any value, and not part of the bucket). An event that satisfies every
 * key counts in the bucket named by the matched keys' values; it is refused
 * when its bucket passes `numRequests` in the rule's window, with Meteor's
 * `too-many-requests` error (in a method's `result`, a subscription's `nosub`).
 * When several rules refuse, the longest wait is reported.
 */
import { createHash } from 'node:crypto';
import { DDPError, defineError } from '../ddp/errors.js';
import { withDeadline } from '../deadline.js';
import { reasonOf } from '../failure-log.js';
import { createLogger, type Logger } from '../log.js';
import { RefusalLog } from '../refusal-log.js';
import { addressGroup } from '../server/address-group.js';
import type { DispatchEvent } from '../server/dispatch-hooks.js';
import { MemoryRateLimitStore } from './rate-limit-memory.js';
import { rateLimitMetrics } from './rate-limit-metrics.js';
import type { Hit, RateLimitStore, RuleWindow } from './rate-limit.js';
import { checkRule } from './rule-check.js';

/** What a rule sees of a method call or subscription (Meteor's rate limiter input). */
export interface RateLimitInput {
  type: 'method' | 'subscription';
  name: string;
  userId: string | null;
  connectionId: string;
  clientAddress: string | undefined;
}

type MatcherValue<T> = T | ((value: T) => boolean) | null;

export type RateLimitMatcher = { [K in keyof RateLimitInput]?: MatcherValue<RateLimitInput[K]> };

export interface RateLimitReply {
  allowed: boolean;
  /** Milliseconds until the deciding rule's window ends (0 when no rule matched). */
  timeToReset: number;
  numInvocationsLeft: number;
}

export type RateLimitCallback = (reply: RateLimitReply, input: RateLimitInput) => void;
export type ErrorMessage = string | ((reply: RateLimitReply) => string);

export const TOO_MANY_REQUESTS = defineError(
  'TOO_MANY_REQUESTS',
  'too-many-requests',
  'Error, too many requests. Please slow down. You must wait {seconds} seconds before trying again.',
);

interface Rule extends RuleWindow {
  readonly matcher: RateLimitMatcher;
  readonly numRequests: number;
  readonly callback: RateLimitCallback | undefined;
  message: ErrorMessage | undefined;
}

/**
 * The longest a call waits for the store (more than the Redis store's wait for its first connection). ioredis keeps
 * a command that was in flight when its connection dropped for resending, and while every reconnection is accepted
 * and then closed (Redis behind a proxy whose backend is down) it neither answers nor fails it.
 */
export const STORE_DEADLINE_MS = 5000;

const defaultMessage = (reply: RateLimitReply): string => TOO_MANY_REQUESTS({ seconds: Math.ceil(reply.timeToReset / 1000) }).reason!;

function matches(rule: Rule, input: RateLimitInput): boolean {
  for (const [key, expected] of Object.entries(rule.matcher)) {
    if (expected === null) continue;
    if (!(key in input)) return false;
    const value = input[key as keyof RateLimitInput];
    if (typeof expected === 'function') {
      if (!(expected as (v: unknown) => boolean)(value)) return false;
    } else if (expected !== value) return false;
  }
  return true;
}

/**
 * The bucket: each non-null matcher key followed by the event's value, concatenated (Meteor's key string), except
 * that an address counts as its client's (an IPv6 address's /64, as the other limits per address count): one IPv6
 * host holds 2^64 addresses, so a bucket per address would limit nothing. Matchers still see the address itself.
 */
function bucketOf(rule: Rule, input: RateLimitInput): string {
  let key = '';
  for (const [name, expected] of Object.entries(rule.matcher)) {
    if (expected === null) continue;
    const value = input[name as keyof RateLimitInput];
    key += name + (name === 'clientAddress' && typeof value === 'string' ? addressGroup(value) : String(value));
  }
  return key;
}

/** The same text on every server running the same app code, so their rules share counters in Redis. */
function describeRule(matcher: RateLimitMatcher, numRequests: number, intervalMs: number): string {
  const parts = Object.entries(matcher).map(([key, value]) => `${key}=${typeof value === 'function' ? `fn:${value.toString()}` : JSON.stringify(value)}`);
  return `${parts.join('&')}|${numRequests}/${intervalMs}`;
}

export interface RateLimiterOptions {
  store: RateLimitStore;
  logger?: Logger;
}

export class RateLimiter {
  private readonly rules = new Map<string, Rule>();
  private readonly store: RateLimitStore;
  /** Counts while the store cannot be reached: this process's own limits rather than none. */
  private readonly fallback = new MemoryRateLimitStore();
  private readonly log: Logger;
  /** Who is refused, once a minute: the metrics and the dashboard's errors say which call, not which client. */
  private readonly refusals: RefusalLog;
  private message: ErrorMessage = defaultMessage;
  /** Since when the store has been failing (logged once when it starts and once when it works again). */
  private storeDownSince: number | undefined;

  constructor(options: RateLimiterOptions) {
    this.store = options.store;
    this.log = options.logger ?? createLogger('rate-limit');
    this.refusals = new RefusalLog(this.log, 'refusing calls over a rate limit (refused: how many since the last line, the one named among them)');
  }

  /**
   * Adds a rule: events matching `matcher` are allowed `numRequests` times per
   * `intervalMs` per bucket (Meteor's defaults: 10 per 1000 ms). Returns the
   * rule's id, for removeRule and setErrorMessageOnRule.
   */
  addRule(matcher: RateLimitMatcher, numRequests = 10, intervalMs = 1000, callback?: RateLimitCallback): string {
    // Meteor's `||` defaults: 0 means the default too.
    numRequests ||= 10;
    intervalMs ||= 1000;
    checkRule(matcher, numRequests, intervalMs, callback);
    const base = createHash('sha256').update(describeRule(matcher, numRequests, intervalMs)).digest('base64url').slice(0, 16);
    let id = base;
    for (let n = 2; this.rules.has(id); n++) id = `${base}-${n}`;
    this.rules.set(id, { id, intervalMs, createdAt: Date.now(), matcher: { ...matcher }, numRequests, callback, message: undefined });
    return id;
  }

  /** Removes a rule (and any limit it imposed); false when there was none by that id. */
  removeRule(id: string): boolean {
    const rule = this.rules.get(id);
    if (!rule) return false;
    this.rules.delete(id);
    void this.fallback.forget(rule);
    void this.store.forget(rule).catch((error: unknown) => this.storeFailed(error));
    return true;
  }

  /** The reason refused clients get: a string, or a function of the reply (`timeToReset` in ms). */
  setErrorMessage(message: ErrorMessage): void {
    this.message = message;
  }

  /** A reason for one rule's refusals, in place of the limiter's. */
  setErrorMessageOnRule(ruleId: string, message: ErrorMessage): void {
    const rule = this.rules.get(ruleId);
    if (!rule) throw new Error(`No rate limit rule with id ${ruleId}`);
    rule.message = message;
  }

  get ruleCount(): number {
    return this.rules.size;
  }

  /**
   * Counts `input` in every matching rule, then decides (Meteor's increment
   * then check). While the store cannot be reached, this process counts
   * alone: a Redis outage neither refuses every call nor lifts every limit
   * (the login guard's included); the servers of a cluster then count apart.
   */
  async apply(input: RateLimitInput): Promise<RateLimitReply & { message?: string }> {
    const reply: RateLimitReply = { allowed: true, timeToReset: 0, numInvocationsLeft: Infinity };
    const matched = [...this.rules.values()].filter((rule) => matches(rule, input));
    if (matched.length === 0) return reply;
    const hits = await this.hits(matched.map((rule) => [rule, bucketOf(rule, input)]));
    let decidingRule: Rule | undefined;
    let longestRefusal = 0;
    matched.forEach((rule, i) => {
      const { count, timeToReset } = hits[i]!;
      if (count > rule.numRequests) {
        // Meteor's arithmetic: the longest reset so far, whichever rule (allowing or refusing) set it.
        if (reply.timeToReset < timeToReset) reply.timeToReset = timeToReset;
        if (!decidingRule || longestRefusal < timeToReset) {
          decidingRule = rule;
          longestRefusal = timeToReset;
        }
        reply.allowed = false;
        reply.numInvocationsLeft = 0;
      } else if (reply.allowed && rule.numRequests - count < reply.numInvocationsLeft) {
        reply.timeToReset = timeToReset;
        reply.numInvocationsLeft = rule.numRequests - count;
      }
      this.runCallback(rule, { ...reply }, input);
    });
    if (reply.allowed) return reply;
    rateLimitMetrics.refused.inc();
    this.refusals.refusedOne({ [input.type]: input.name, address: input.clientAddress, user: input.userId ?? undefined, connection: input.connectionId });
    const message = decidingRule?.message ?? this.message;
    return { ...reply, message: typeof message === 'function' ? message(reply) : message };
  }

  /**
   * A limit on what no rule can name, such as the e-mail address a forgotPassword call mails: `numRequests` per
   * `intervalMs` for each key, counted in this limiter's store (so shared by a cluster through Redis). Returns the
   * function that counts one event for a key and says whether it is allowed.
   */
  keyLimit(name: string, numRequests: number, intervalMs: number): (key: string) => Promise<RateLimitReply> {
    checkRule({}, numRequests, intervalMs, undefined);
    const id = `key-${createHash('sha256').update(`${name}|${numRequests}/${intervalMs}`).digest('base64url').slice(0, 16)}`;
    const window: RuleWindow = { id, intervalMs, createdAt: Date.now() };
    return async (key) => {
      const [{ count, timeToReset }] = (await this.hits([[window, key]])) as [Hit];
      const allowed = count <= numRequests;
      if (!allowed) {
        rateLimitMetrics.refused.inc();
        this.refusals.refusedOne({ limit: name, key });
      }
      return { allowed, timeToReset, numInvocationsLeft: Math.max(0, numRequests - count) };
    };
  }

  /** The dispatch hook (server.beforeDispatch): refuses a call over its limit with `too-many-requests`. */
  readonly hook = async (event: DispatchEvent): Promise<void> => {
    if (this.rules.size === 0) return;
    const { type, name, userId, connectionId, clientAddress } = event;
    const reply = await this.apply({ type, name, userId, connectionId, clientAddress });
    if (!reply.allowed) throw new DDPError(TOO_MANY_REQUESTS.code, reply.message, { timeToReset: reply.timeToReset });
  };

  async close(): Promise<void> {
    await this.fallback.close();
    await this.store.close();
  }

  /** Counts one event in each bucket, in the store, or in this process while the store cannot be reached. */
  private async hits(buckets: Array<[RuleWindow, string]>): Promise<Hit[]> {
    const now = Date.now();
    const count = (store: RateLimitStore) => Promise.all(buckets.map(([rule, bucket]) => store.hit(rule, bucket, now)));
    try {
      const hits = await withDeadline(count(this.store), STORE_DEADLINE_MS, () => new Error(`no answer within ${STORE_DEADLINE_MS} ms`));
      this.storeWorks(now);
      return hits;
    } catch (error) {
      this.storeFailed(error);
      return count(this.fallback);
    }
  }

  private runCallback(rule: Rule, reply: RateLimitReply, input: RateLimitInput): void {
    if (!rule.callback) return;
    try {
      rule.callback(reply, input);
    } catch (error) {
      this.log.error('a rate limit rule callback failed', { rule: rule.id, error });
    }
  }

  private storeFailed(error: unknown): void {
    rateLimitMetrics.storeErrors.inc();
    if (this.storeDownSince !== undefined) return;
    this.storeDownSince = Date.now();
    this.log.warn('rate limit store unreachable; counting in this process meanwhile', { error: reasonOf(error) });
  }

  /** A hit sent at `sentAt` was answered: news only if it was sent after the store began failing (not one in flight then). */
  private storeWorks(sentAt: number): void {
    if (this.storeDownSince === undefined || sentAt <= this.storeDownSince) return;
    this.storeDownSince = undefined;
    this.log.info('rate limit store reachable again; counting in it');
  }
}
