/**
 * Checks a rate limit rule as addRule is given it. Meteor's DDPRateLimiter takes
 * anything: a misspelt key (`userID`) or type (`'methods'`) gives a rule that
 * never matches, a negative count one that refuses every call, an interval in
 * a string one that never resets; each was silent. Each is now one line saying
 * what to write instead.
 */
import type { RateLimitInput } from './rate-limiter.js';

const KEYS: ReadonlyArray<keyof RateLimitInput> = ['type', 'name', 'userId', 'connectionId', 'clientAddress'];

function shown(value: unknown): string {
  if (typeof value === 'string') return JSON.stringify(value);
  if (value instanceof RegExp) return String(value);
  return typeof value === 'object' && value !== null ? (Array.isArray(value) ? 'an array' : 'an object') : String(value);
}

function checkMatcherValue(key: string, value: unknown): void {
  if (value === null || typeof value === 'function') return;
  if (value === undefined) throw new TypeError(`Rate limit rule: ${key} is undefined; use null to match any value`);
  if (key === 'type') {
    if (value !== 'method' && value !== 'subscription') throw new TypeError(`Rate limit rule: type must be 'method' or 'subscription' (or a function, or null), not ${shown(value)}`);
  } else if (typeof value !== 'string') {
    throw new TypeError(`Rate limit rule: ${key} must be a string, a function or null, not ${shown(value)}`);
  }
}

/** Throws a TypeError, one line, for a rule that could not work as meant; `numRequests` and `intervalMs` after Meteor's defaults. */
export function checkRule(matcher: unknown, numRequests: unknown, intervalMs: unknown, callback: unknown): void {
  if (typeof matcher !== 'object' || matcher === null || Array.isArray(matcher)) {
    throw new TypeError(`Rate limit rule: the matcher must be an object such as { type: 'method', name: 'login' }, not ${shown(matcher)}`);
  }
  for (const [key, value] of Object.entries(matcher)) {
    if (!KEYS.includes(key as keyof RateLimitInput)) throw new TypeError(`Rate limit rule: unknown matcher key ${JSON.stringify(key)} (the keys are ${KEYS.join(', ')})`);
    checkMatcherValue(key, value);
  }
  if (typeof numRequests !== 'number' || !Number.isInteger(numRequests) || numRequests < 1) {
    throw new TypeError(`Rate limit rule: numRequests must be a whole number of at least 1, not ${shown(numRequests)}`);
  }
  if (typeof intervalMs !== 'number' || !Number.isFinite(intervalMs) || intervalMs <= 0) {
    throw new TypeError(`Rate limit rule: intervalMs must be a number of milliseconds above 0, not ${shown(intervalMs)}`);
  }
  if (callback !== undefined && typeof callback !== 'function') throw new TypeError(`Rate limit rule: the callback must be a function, not ${shown(callback)}`);
}
