/**
 * The server's side of a typed contract (src/contract/): `implement(definition,
 * handler)` is the handler with its parameters validated against the
 * definition's schemas (a mismatch is Meteor's 400 "Match failed") and, for a
 * method whose result is a schema, its result checked before it is sent (a
 * mismatch is the server's bug: a 500, logged). The handler's parameter and
 * return types come from the definition.
 */
import type { StandardSchemaV1 } from '@standard-schema/spec';
import type { MethodDefinition, ParamsOut, PublicationDefinition, Schemas } from '../contract/index.js';
import type { MethodInvocation } from '../server/method-invocation.js';
import type { Subscription } from '../server/subscription.js';
import { validated } from './schema.js';

async function checkedResult(schema: StandardSchemaV1, name: string, value: unknown): Promise<unknown> {
  let outcome = schema['~standard'].validate(value);
  if (outcome instanceof Promise) outcome = await outcome;
  if (outcome.issues) {
    throw new Error(`Method '${name}' returned a result its definition refuses: ${outcome.issues.map((issue) => issue.message).join('; ')}`);
  }
  return outcome.value;
}

export function implement<const P extends Schemas, R>(
  definition: MethodDefinition<P, R>,
  handler: (this: MethodInvocation, ...args: ParamsOut<P>) => R | Promise<R>,
): (this: MethodInvocation, ...params: unknown[]) => Promise<R>;
export function implement<const P extends Schemas>(
  definition: PublicationDefinition<P>,
  handler: (this: Subscription, ...args: ParamsOut<P>) => unknown,
): (this: Subscription, ...params: unknown[]) => Promise<unknown>;
export function implement(
  definition: MethodDefinition | PublicationDefinition,
  handler: (this: unknown, ...args: unknown[]) => unknown,
): (this: unknown, ...params: unknown[]) => Promise<unknown> {
  const run = validated(definition.params, handler as (this: unknown, ...args: unknown[]) => unknown);
  const resultSchema = definition.kind === 'method' ? definition.result : undefined;
  if (!resultSchema) return run;
  return async function (this: unknown, ...params: unknown[]) {
    return checkedResult(resultSchema, definition.name, await run.apply(this, params));
  };
}
