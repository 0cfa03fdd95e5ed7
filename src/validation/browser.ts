/**
 * perseid/check: Meteor's `check` and `Match` without the server, for method
 * code a page shares with it (its stubs call check as the server's methods
 * do). `perseid` itself cannot go into a page's bundle; perseid/client leaves
 * check out, so that pages which do not use it do not carry it.
 */
export { check, Match } from './check.js';
export type { Matched, Pattern } from './check.js';
export { MatchError } from './match-error.js';
