/**
 * Argument validation with any Standard Schema library (zod, valibot, arktype,
 * ...): `validated([schema, ...], handler)` wraps a method or publish handler
 * so that each parameter is checked (and parsed, with the schema's output)
 * before it runs. A mismatch, or a parameter no schema covers, reaches the
 * client as Meteor's 400 "Match failed"; the issues go to the server's debug log.
 */
import type { StandardSchemaV1 } from '@standard-schema/spec';
import { MatchError } from './match-error.js';

type Outputs<S extends readonly StandardSchemaV1[]> = { [K in keyof S]: StandardSchemaV1.InferOutput<S[K]> };

function pathOf(issue: StandardSchemaV1.Issue): string {
  return (issue.path ?? []).map((segment) => String(typeof segment === 'object' ? segment.key : segment)).join('.');
}

/** Validates `value` against `schema`; resolves with the schema's output, or throws MatchError. */
export async function validate<S extends StandardSchemaV1>(schema: S, value: unknown, where = ''): Promise<StandardSchemaV1.InferOutput<S>> {
  let result = schema['~standard'].validate(value);
  if (result instanceof Promise) result = await result;
  if (result.issues) {
    const [first] = result.issues;
    const path = [where, first ? pathOf(first) : ''].filter(Boolean).join('.');
    throw new MatchError(result.issues.map((issue) => issue.message).join('; '), path);
  }
  return result.value as StandardSchemaV1.InferOutput<S>;
}

/**
 * Wraps `handler` to take exactly the parameters `schemas` describe, each
 * validated and replaced by its schema's output. `this` (the method
 * invocation or subscription) passes through.
 */
export function validated<This, const S extends readonly StandardSchemaV1[], R>(
  schemas: S,
  handler: (this: This, ...args: Outputs<S>) => R,
): (this: This, ...params: unknown[]) => Promise<Awaited<R>> {
  return async function (this: This, ...params: unknown[]): Promise<Awaited<R>> {
    if (params.length > schemas.length) throw new MatchError(`Expected at most ${schemas.length} parameters, got ${params.length}`);
    const args = await Promise.all(schemas.map((schema, i) => validate(schema, params[i], `params[${i}]`)));
    return await (handler as (this: This, ...args: unknown[]) => R).apply(this, args);
  };
}
