/**
 * Meteor's `check(value, pattern)` and `Match`, for code ported from Meteor:
 * the same patterns (String, Number, Boolean, Function, Object, Date and other
 * constructors, `[pattern]`, `{key: pattern}`, literals, null, undefined,
 * Match.Any, Integer, Optional, Maybe, OneOf, Where, ObjectIncluding) and the
 * same messages. Written here because Meteor's `check` ships only inside
 * Meteor; for new code, `validated()` with a Standard Schema library is the
 * typed choice.
 */
import { MatchError } from './match-error.js';

const OPTIONAL = Symbol('Match.Optional');
const MAYBE = Symbol('Match.Maybe');

class Optional {
  constructor(
    readonly pattern: Pattern,
    readonly kind: typeof OPTIONAL | typeof MAYBE,
  ) {}
}
class OneOf {
  constructor(readonly choices: Pattern[]) {}
}
class Where {
  constructor(readonly condition: (value: unknown) => boolean) {}
}
class Including {
  constructor(readonly pattern: Record<string, Pattern>) {}
}
const Any = Object.freeze({ toString: () => 'Match.Any' });
const Integer = Object.freeze({ toString: () => 'Match.Integer' });

type Constructor = abstract new (...args: never[]) => unknown;
export type Pattern =
  | StringConstructor
  | NumberConstructor
  | BooleanConstructor
  | FunctionConstructor
  | ObjectConstructor
  | Constructor
  | Optional
  | OneOf
  | Where
  | Including
  | typeof Any
  | typeof Integer
  | string
  | number
  | boolean
  | null
  | undefined
  | Pattern[]
  | { [key: string]: Pattern };

function typeName(value: unknown): string {
  if (value === null) return 'null';
  if (Array.isArray(value)) return 'array';
  return typeof value;
}

function isPlainObject(value: unknown): value is Record<string, unknown> {
  if (typeof value !== 'object' || value === null) return false;
  const proto = Object.getPrototypeOf(value) as unknown;
  return proto === Object.prototype || proto === null;
}

function join(path: string, key: string | number): string {
  if (typeof key === 'number') return `${path}[${key}]`;
  return /^[A-Za-z_$][\w$]*$/.test(key) ? (path ? `${path}.${key}` : key) : `${path}[${JSON.stringify(key)}]`;
}

const PRIMITIVES = new Map<unknown, string>([
  [String, 'string'],
  [Number, 'number'],
  [Boolean, 'boolean'],
  [Function, 'function'],
]);

/** Throws MatchError (detail, path) when `value` does not match `pattern`. */
function test(value: unknown, pattern: Pattern, path: string): void {
  if (pattern === Any) return;
  if (pattern === null || pattern === undefined || typeof pattern === 'string' || typeof pattern === 'number' || typeof pattern === 'boolean') {
    if (value !== pattern) throw new MatchError(`Expected ${JSON.stringify(pattern) ?? 'undefined'}, got ${JSON.stringify(value) ?? 'undefined'}`, path);
    return;
  }
  const primitive = PRIMITIVES.get(pattern);
  if (primitive) {
    if (typeof value === primitive) {
      // Meteor rejects NaN and infinities for Number only under Match.Integer; a plain Number takes them.
      return;
    }
    throw new MatchError(`Expected ${primitive}, got ${typeName(value)}`, path);
  }
  if (pattern === Integer) {
    // Meteor's test, `(value | 0) === value`: a signed 32-bit integer.
    if (typeof value === 'number' && (value | 0) === value) return;
    throw new MatchError(`Expected Integer, got ${value instanceof Object ? JSON.stringify(value) : String(value)}`, path);
  }
  if (pattern instanceof Optional) {
    if (value === undefined || (pattern.kind === MAYBE && value === null)) return;
    test(value, pattern.pattern, path);
    return;
  }
  if (pattern instanceof OneOf) {
    for (const choice of pattern.choices) {
      try {
        test(value, choice, path);
        return;
      } catch (error) {
        if (!(error instanceof MatchError)) throw error;
      }
    }
    throw new MatchError('Failed Match.OneOf, Match.Maybe or Match.Optional validation', path);
  }
  if (pattern instanceof Where) {
    let ok: boolean;
    try {
      ok = pattern.condition(value);
    } catch (error) {
      if (error instanceof MatchError) throw new MatchError(error.detail, error.path ? join(path, error.path) : path);
      throw error;
    }
    if (!ok) throw new MatchError('Failed Match.Where validation', path);
    return;
  }
  if (Array.isArray(pattern)) {
    if (pattern.length !== 1) throw new Error(`Bad pattern: arrays must have one type element ${JSON.stringify(pattern)}`);
    if (!Array.isArray(value)) throw new MatchError(`Expected array, got ${typeName(value)}`, path);
    value.forEach((element, i) => test(element, pattern[0] as Pattern, join(path, i)));
    return;
  }
  if (pattern === Object) {
    if (isPlainObject(value)) return;
    throw new MatchError(`Expected object, got ${typeName(value)}`, path);
  }
  if (typeof pattern === 'function') {
    if (value instanceof (pattern as Constructor)) return;
    throw new MatchError(`Expected ${(pattern as { name?: string }).name || 'particular constructor'}`, path);
  }
  const including = pattern instanceof Including;
  const shape = including ? (pattern as Including).pattern : (pattern as Record<string, Pattern>);
  if (!isPlainObject(value)) throw new MatchError(`Expected object, got ${typeName(value)}`, path);
  for (const key of Object.keys(value)) {
    if (Object.hasOwn(shape, key)) test(value[key], shape[key] as Pattern, join(path, key));
    else if (!including) throw new MatchError('Unknown key', join(path, key));
  }
  for (const [key, sub] of Object.entries(shape)) {
    if (Object.hasOwn(value, key)) continue;
    if (!(sub instanceof Optional)) throw new MatchError(`Missing key '${key}'`, path);
  }
}

/** What a simple pattern guarantees about the value, for TypeScript (unknown for the rest). */
export type Matched<P> = P extends StringConstructor ? string : P extends NumberConstructor ? number : P extends BooleanConstructor ? boolean : P extends DateConstructor ? Date : unknown;

/** Throws Match.Error (sent to clients as 400 "Match failed") unless `value` matches `pattern`. */
export function check<P extends Pattern>(value: unknown, pattern: P): asserts value is Matched<P> {
  test(value, pattern, '');
}

export const Match = {
  Any,
  Integer,
  Error: MatchError,
  Optional: (pattern: Pattern) => new Optional(pattern, OPTIONAL),
  Maybe: (pattern: Pattern) => new Optional(pattern, MAYBE),
  OneOf: (...choices: Pattern[]) => {
    if (choices.length === 0) throw new Error('Must provide at least one pattern to Match.OneOf');
    return new OneOf(choices);
  },
  Where: (condition: (value: unknown) => boolean) => new Where(condition),
  ObjectIncluding: (pattern: Record<string, Pattern>) => new Including(pattern),
  /** Whether `value` matches `pattern`, without throwing. */
  test(value: unknown, pattern: Pattern): boolean {
    try {
      test(value, pattern, '');
      return true;
    } catch (error) {
      if (error instanceof MatchError) return false;
      throw error;
    }
  },
};
