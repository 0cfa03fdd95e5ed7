/**
 * mingo-browser: what mingo.ts offers, for browser bundles. The selector,
 * projection and update operators are mingo's own (so a query means in a
 * page what it means on the server); the expression, aggregation and window
 * operators stay out, so `$expr` is refused in a page. package.json's
 * "browser" field swaps this file in for mingo.ts.
 */
import { Context } from 'mingo/core';
import * as projectionOperators from 'mingo/operators/projection';
import * as queryOperators from 'mingo/operators/query';
import { Query } from 'mingo/query';
import { update } from 'mingo/updater';
import type { Document } from './types.js';

const context = Context.init({ query: queryOperators, projection: projectionOperators });
const options = { context };

export function mingoQuery(selector: Document): { test(doc: Document): boolean } {
  return new Query(selector, options);
}

export function mingoProject(doc: Document, projection: Document): Document {
  return new Query({}, options).find([doc], projection).all()[0] as Document;
}

export function mingoUpdate(doc: Document, operators: Document, selector?: Document): string[] {
  return update(doc, operators, undefined, selector, { queryOptions: options });
}
