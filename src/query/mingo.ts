/**
 * The parts of mingo the query code uses, with every operator mingo has
 * (`$expr` needs the expression operators) and MongoDB's `$type`
 * (type-operator.ts). Browsers get mingo-browser.ts instead (package.json
 * "browser" maps one to the other): the same operators for selectors,
 * projections and updates, without the aggregation ones that would triple
 * the client's bundle.
 */
import { Context } from 'mingo/core';
import * as accumulatorOperators from 'mingo/operators/accumulator';
import * as expressionOperators from 'mingo/operators/expression';
import * as pipelineOperators from 'mingo/operators/pipeline';
import * as projectionOperators from 'mingo/operators/projection';
import * as queryOperators from 'mingo/operators/query';
import * as windowOperators from 'mingo/operators/window';
import { Query } from 'mingo/query';
import { update, updateMany } from 'mingo/updater';
import { $type } from './type-operator.js';
import type { Document } from './types.js';

// mingo's own entry point merges a caller's context under its operators, so `$type` is replaced here, in a context of our own.
const context = Context.init({
  accumulator: accumulatorOperators,
  expression: expressionOperators,
  pipeline: pipelineOperators,
  projection: projectionOperators,
  query: { ...queryOperators, $type },
  window: windowOperators,
});
const options = { context };

/** A compiled selector. */
export function mingoQuery(selector: Document): { test(doc: Document): boolean } {
  return new Query(selector, options);
}

/** `doc` projected by an operator projection (`$slice`, `$elemMatch`, positional `$`). */
export function mingoProject(doc: Document, projection: Document): Document {
  return new Query({}, options).find([doc], projection).all()[0] as Document;
}

/** Applies update operators to `doc` in place; returns the changed paths. `selector` resolves positional paths. */
export function mingoUpdate(doc: Document, operators: Document, selector?: Document): string[] {
  return update(doc, operators, undefined, selector, { queryOptions: options });
}

/** Applies the same update operators to every document of `docs` in place, with one operator context for them all. */
export function mingoUpdateAll(docs: Document[], operators: Document): void {
  updateMany(docs, {}, operators, {}, options);
}
