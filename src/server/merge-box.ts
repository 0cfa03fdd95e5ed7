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
  /**
   * Set by its view: no other holder of the collection to merge with (it is
   * the only one, or the collection is not merged), so its changes may go to
   * the connection as they are. Every change goes this way for every
   * subscriber, and this spares it a look at the view and the other holders.
   */
  alone: boolean;
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

/** Where a connection's messages go (its session). */
export interface OutputSink {
  sendEncoded(message: EncodedMessage): void;
}

/** Something that can produce the message for a change once for all its recipients (a live query's DocChange). */
export interface SharedMessage {
  message(): EncodedMessage;
}

function merged(holders: readonly Holder[], key: string, replace?: Holder, replacement?: Fields): Fields {
  const out: Fields = {};
  for (const holder of holders) {
    const fields = holder === replace ? replacement : holder.has(key) ? holder.fields(key) : undefined;
    if (!fields) continue;
    for (const name in fields) if (!(name in out)) out[name] = fields[name];
  }
  return out;
}

/** One collection of one connection's merge box: what its holders publish, merged. */
export class CollectionView {
  private holders: Holder[] = [];

  constructor(
    readonly name: string,
    readonly strategy: PublicationStrategy,
    readonly sink: OutputSink,
  ) {}

  get holderCount(): number {
    return this.holders.length;
  }

  add(holder: Holder): void {
    this.setHolders([...this.holders, holder]);
  }

  remove(holder: Holder): void {
    holder.alone = false;
    this.setHolders(this.holders.filter((h) => h !== holder));
  }

  private setHolders(holders: Holder[]): void {
    this.holders = holders;
    const alone = holders.length === 1 || this.strategy !== 'SERVER_MERGE';
    for (const holder of holders) holder.alone = alone;
  }

  /**
   * `holder` now publishes `key` with `fields`. `shared` gives the message to
   * send when no other holder has the document.
   */
  added(holder: Holder, key: string, fields: Fields, shared?: SharedMessage): void {
    if (!this.sharedWith(holder, key)) {
      this.sink.sendEncoded(shared ? shared.message() : encodeAdded(this.name, key, fields));
      return;
    }
    this.sendDiff(key, merged(this.holders, key, holder, undefined), merged(this.holders, key, holder, fields));
  }

  changed(holder: Holder, key: string, before: Fields, after: Fields, shared?: SharedMessage): void {
    if (!this.sharedWith(holder, key)) {
      if (shared) this.sink.sendEncoded(shared.message());
      else this.sendDiff(key, before, after);
      return;
    }
    this.sendDiff(key, merged(this.holders, key, holder, before), merged(this.holders, key, holder, after));
  }

  removed(holder: Holder, key: string, before: Fields, shared?: SharedMessage): void {
    if (!this.sharedWith(holder, key)) {
      this.sink.sendEncoded(shared ? shared.message() : encodeRemoved(this.name, key));
      return;
    }
    this.sendDiff(key, merged(this.holders, key, holder, before), merged(this.holders, key, holder, undefined));
  }

  /** Whether a holder other than `self` publishes `key`. */
  private sharedWith(self: Holder, key: string): boolean {
    if (self.alone) return false;
    const holders = this.holders;
    for (let i = 0; i < holders.length; i++) {
      const h = holders[i]!;
      if (h !== self && h.has(key)) return true;
    }
    return false;
  }

  private sendDiff(key: string, before: Fields, after: Fields): void {
    const diff = diffFields(before, after);
    if (diff) this.sink.sendEncoded(encodeChanged(this.name, key, diff.fields, diff.cleared));
  }
}

export class MergeBox {
  private readonly views = new Map<string, CollectionView>();

  constructor(
    private readonly sink: OutputSink,
    private readonly strategyOf: (collection: string) => PublicationStrategy,
  ) {}

  /** Adds a holder; it sends its events to the returned view. */
  register(collection: string, holder: Holder): CollectionView {
    let view = this.views.get(collection);
    if (!view) {
      view = new CollectionView(collection, this.strategyOf(collection), this.sink);
      this.views.set(collection, view);
    }
    view.add(holder);
    return view;
  }

  unregister(view: CollectionView, holder: Holder): void {
    view.remove(holder);
    if (view.holderCount === 0 && this.views.get(view.name) === view) this.views.delete(view.name);
  }
}
