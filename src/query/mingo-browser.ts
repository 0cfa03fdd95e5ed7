/**
 * mingo-browser: what mingo.ts offers, for browser bundles. The selector,
 * projection and update operators are mingo's own, with MongoDB's `$type`
 * (so a query means in a page what it means on the server); the expression, aggregation and window
 * operators stay out. package.json's "browser" field swaps this file in for
 * mingo.ts.
 *
 * Three query operators are refused in a page, at compile time, with an error
 * naming them: `$where` (runs code, server-only), `$expr` (needs the
 * expression operators) and `$jsonSchema` (needs a schema validator). The
 * other operators stay: they cost nothing extra, as mingo's updater imports
 * every query operator anyway (BENCHMARKS.md, browser bundle size).
 */
import { Context } from 'mingo/core';
import * as projectionOperators from 'mingo/operators/projection';
import * as queryOperators from 'mingo/operators/query';
import { Query } from 'mingo/query';
import { update, updateMany } from 'mingo/updater';
import { $type } from './type-operator.js';
import type { Document } from './types.js';

/** The query operators a page refuses. */
const SERVER_ONLY_OPERATORS = ['$where', '$expr', '$jsonSchema'] as const;

function refuse(operator: string): (field: string, value: unknown) => never {
  return (_field, value) => {
    throw new Error(`${operator} is not available in the browser client (${operator}: ${JSON.stringify(value)}): run this query on the server`);
  };
}

const context = Context.init({
  query: { ...queryOperators, $type, ...Object.fromEntries(SERVER_ONLY_OPERATORS.map((op) => [op, refuse(op)])) },
  projection: projectionOperators,
});
// scriptEnabled lets `$where` reach its refusal instead of mingo's note about the option.
const options = { context, scriptEnabled: true };

export function mingoQuery(selector: Document): { test(doc: Document): boolean } {
  return new Query(selector, options);
}

export function mingoProject(doc: Document, projection: Document): Document {
  return new Query({}, options).find([doc], projection).all()[0] as Document;
}

export function mingoUpdate(doc: Document, operators: Document, selector?: Document): string[] {
  return update(doc, operators, undefined, selector, { queryOptions: options });
}

export function mingoUpdateAll(docs: Document[], operators: Document): void {
  updateMany(docs, {}, operators, {}, options);
}
