/** Argument validation: Standard Schema (`validated`, `validate`, typed contracts' `implement`) and Meteor's `check`/`Match`. */
export { validated, validate } from './schema.js';
export { implement } from './implement.js';
export { check, Match, type Pattern } from './check.js';
export { MatchError, MATCH_FAILED } from './match-error.js';
