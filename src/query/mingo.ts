/**
 * The parts of mingo the query code uses, with every operator mingo has
 * (`$expr` needs the expression operators). Browsers get
 * mingo-browser.ts instead (package.json "browser" maps one to the other):
 * the same operators for selectors, projections and updates, without the
 * aggregation ones that would triple the client's bundle.
 */
import { find, Query, update } from 'mingo';
import { updateMany } from 'mingo/updater';
import type { Document } from './types.js';

/** A compiled selector. */
export function mingoQuery(selector: Document): { test(doc: Document): boolean } {
  return new Query(selector, {});
}

/** `doc` projected by an operator projection (`$slice`, `$elemMatch`, positional `$`). */
export function mingoProject(doc: Document, projection: Document): Document {
  return find([doc], {}, projection).all()[0] as Document;
}

/** Applies update operators to `doc` in place; returns the changed paths. `selector` resolves positional paths. */
export function mingoUpdate(doc: Document, operators: Document, selector?: Document): string[] {
  return update(doc, operators, undefined, selector);
}

/** Applies the same update operators to every document of `docs` in place, with one operator context for them all. */
export function mingoUpdateAll(docs: Document[], operators: Document): void {
  updateMany(docs, {}, operators);
}
