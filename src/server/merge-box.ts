/**
 * The per-connection merge box (DDP notes §4.1): when several subscriptions of
 * one connection publish the same document, the client sees one document whose
 * fields are the union, and nothing is sent twice or dropped.
 *
 * Unlike Meteor's, it keeps no copy of the documents. Every source of documents
 * (a "holder": one cursor of a subscription, or one collection of a subscription
 * using the low-level API) can say whether it holds a document and with which
 * fields; a cursor holder answers from the shared live query. So when a single
 * holder publishes a document, which is the usual case, its change goes to the
 * client as the live query's shared, already serialised message, and the merge
 * box costs one lookup per other holder of the same collection.
 *
 * Field precedence: where holders disagree on a field, the earliest registered
 * holder that has the field wins.
 */
import { encodeAdded, encodeChanged, encodeRemoved, type EncodedMessage } from '../ddp/encoded.js';
import { diffFields, type Fields } from '../reactive/doc-change.js';

export interface Holder {
  /** Whether this holder currently publishes the document (as the client was told). */
  has(key: string): boolean;
  /** The fields it publishes for the document. */
  fields(key: string): Fields | undefined;
}

/**
 * - `SERVER_MERGE` (default): full merging as above.
 * - `NO_MERGE`: messages pass through; overlapping subscriptions are not merged
 *   (use when one subscription per connection publishes a collection).
 * - `NO_MERGE_NO_HISTORY`: as NO_MERGE, and stopping a subscription sends no
 *   removals; nothing at all is tracked per subscription.
 */
export type PublicationStrategy = 'SERVER_MERGE' | 'NO_MERGE' | 'NO_MERGE_NO_HISTORY';

type Send = (message: EncodedMessage) => void;

function merged(holders: readonly Holder[], key: string, replace?: Holder, replacement?: Fields): Fields {
  const out: Fields = {};
  for (const holder of holders) {
    const fields = holder === replace ? replacement : holder.has(key) ? holder.fields(key) : undefined;
    if (!fields) continue;
    for (const name in fields) if (!(name in out)) out[name] = fields[name];
  }
  return out;
}

class CollectionView {
  holders: Holder[] = [];

  constructor(
    readonly name: string,
    readonly strategy: PublicationStrategy,
  ) {}

  /** Whether a holder other than `self` publishes `key`. */
  sharedWith(self: Holder, key: string): boolean {
    if (this.strategy !== 'SERVER_MERGE') return false;
    const holders = this.holders;
    for (let i = 0; i < holders.length; i++) {
      const h = holders[i]!;
      if (h !== self && h.has(key)) return true;
    }
    return false;
  }
}

export class MergeBox {
  private readonly views = new Map<string, CollectionView>();

  constructor(
    private readonly send: Send,
    private readonly strategyOf: (collection: string) => PublicationStrategy,
  ) {}

  strategy(collection: string): PublicationStrategy {
    return this.view(collection).strategy;
  }

  register(collection: string, holder: Holder): void {
    const view = this.view(collection);
    view.holders = [...view.holders, holder];
  }

  unregister(collection: string, holder: Holder): void {
    const view = this.views.get(collection);
    if (!view) return;
    view.holders = view.holders.filter((h) => h !== holder);
    if (view.holders.length === 0) this.views.delete(collection);
  }

  /**
   * `holder` now publishes `key` with `fields` (it must already answer `has` with
   * true, or be about to). `shared` is the message to send when no other holder
   * has the document.
   */
  added(collection: string, holder: Holder, key: string, fields: Fields, shared?: () => EncodedMessage): void {
    const view = this.view(collection);
    if (!view.sharedWith(holder, key)) {
      this.send(shared ? shared() : encodeAdded(collection, key, fields));
      return;
    }
    const before = merged(view.holders, key, holder, undefined);
    const after = merged(view.holders, key, holder, fields);
    this.sendDiff(collection, key, before, after);
  }

  changed(collection: string, holder: Holder, key: string, before: Fields, after: Fields, shared?: () => EncodedMessage): void {
    const view = this.view(collection);
    if (!view.sharedWith(holder, key)) {
      if (shared) this.send(shared());
      else this.sendDiff(collection, key, before, after);
      return;
    }
    this.sendDiff(collection, key, merged(view.holders, key, holder, before), merged(view.holders, key, holder, after));
  }

  removed(collection: string, holder: Holder, key: string, before: Fields, shared?: () => EncodedMessage): void {
    const view = this.view(collection);
    if (!view.sharedWith(holder, key)) {
      this.send(shared ? shared() : encodeRemoved(collection, key));
      return;
    }
    this.sendDiff(collection, key, merged(view.holders, key, holder, before), merged(view.holders, key, holder, undefined));
  }

  private sendDiff(collection: string, key: string, before: Fields, after: Fields): void {
    const diff = diffFields(before, after);
    if (diff) this.send(encodeChanged(collection, key, diff.fields, diff.cleared));
  }

  private view(collection: string): CollectionView {
    let view = this.views.get(collection);
    if (!view) {
      view = new CollectionView(collection, this.strategyOf(collection));
      this.views.set(collection, view);
    }
    return view;
  }
}
