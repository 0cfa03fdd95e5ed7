/** Argument validation: Standard Schema (`validated`, `validate`) and Meteor's `check`/`Match`. */
export { validated, validate } from './schema.js';
export { check, Match, type Pattern } from './check.js';
export { MatchError, MATCH_FAILED } from './match-error.js';
