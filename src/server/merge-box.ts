/**
 * The per-connection merge box (DDP notes §4.1): when several subscriptions of
 * one connection publish the same document, the client sees one document whose
 * fields are the union, and nothing is sent twice or dropped.
 *
 * Unlike Meteor's, it keeps no copy of a document one holder publishes alone.
 * Every source of documents (a "holder": one cursor of a subscription, or one
 * collection of a subscription using the low-level API) can give the fields it
 * publishes for a document; a cursor holder answers from the shared live query.
 * A holder alone in its collection sends its changes as the live query's
 * shared, already serialised message. Once a second holder joins, the view
 * keeps an index of which holders have told it of each document (what a live
 * query holds can be ahead of what its subscribers were told, while it tells
 * them in turn), and for a document two or more hold, each one's fields as told
 * and the union the client has. Every step then costs the fields it touches,
 * not the number of holders: a connection with hundreds of overlapping
 * subscriptions pays per subscription what it pays for one.
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
   * subscriber, and this spares it a look at the view.
   */
  alone: boolean;
  /** The fields it publishes for the document. */
  fields(key: string): Fields | undefined;
  /** Every document it publishes. */
  forEach(callback: (key: string, fields: Fields) => void): void;
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

/** A document two or more holders publish: the fields each told, in precedence order, and their union as the client has it. */
class SharedDoc {
  constructor(
    public owners: Map<Holder, Fields>,
    readonly sent: Fields,
    /** Rank of the latest holder to join; only grows, so a holder ranked above it joins at the end. */
    public lastRank: number,
  ) {}
}

const ABSENT = Symbol('absent');

/** The value of `name` the client should see: the first owner's that has the field. */
function winning(owners: Map<Holder, Fields>, name: string): unknown {
  for (const fields of owners.values()) if (name in fields) return fields[name];
  return ABSENT;
}

/** One collection of one connection's merge box: what its holders publish, merged. */
export class CollectionView {
  private holders: Holder[] = [];
  private readonly ranks = new Map<Holder, number>();
  private nextRank = 0;
  /** While two or more holders merge: who has told the view of each document. */
  private docs: Map<string, Holder | SharedDoc> | undefined;

  constructor(
    readonly name: string,
    readonly strategy: PublicationStrategy,
    readonly sink: OutputSink,
  ) {}

  get holderCount(): number {
    return this.holders.length;
  }

  add(holder: Holder): void {
    this.ranks.set(holder, this.nextRank++);
    this.setHolders([...this.holders, holder]);
  }

  remove(holder: Holder): void {
    holder.alone = false;
    this.ranks.delete(holder);
    this.setHolders(this.holders.filter((h) => h !== holder));
  }

  private setHolders(holders: Holder[]): void {
    const merging = holders.length > 1 && this.strategy === 'SERVER_MERGE';
    if (merging && !this.docs) {
      // The holder that was alone has told the client of everything it publishes.
      const docs = new Map<string, Holder | SharedDoc>();
      for (const holder of this.holders) holder.forEach((key) => docs.set(key, holder));
      this.docs = docs;
    } else if (!merging) this.docs = undefined;
    this.holders = holders;
    for (const holder of holders) holder.alone = !merging;
  }

  /**
   * `holder` now publishes `key` with `fields`. `shared` gives the message to
   * send when no other holder has the document.
   */
  added(holder: Holder, key: string, fields: Fields, shared?: SharedMessage): void {
    const entry = holder.alone ? undefined : this.docs!.get(key);
    if (entry === undefined) {
      if (!holder.alone) this.docs!.set(key, holder);
      this.sink.sendEncoded(shared ? shared.message() : encodeAdded(this.name, key, fields));
    } else if (entry instanceof SharedDoc) {
      const rank = this.ranks.get(holder)!;
      if (rank > entry.lastRank) {
        // Joining last, it can only add fields no earlier holder has.
        entry.owners.set(holder, fields);
        entry.lastRank = rank;
        this.refresh(key, entry, Object.keys(fields).filter((name) => !(name in entry.sent)));
      } else {
        entry.owners = this.ranked([...entry.owners, [holder, fields]]);
        this.refresh(key, entry, Object.keys(fields));
      }
    } else if (entry !== holder) {
      const told = entry.fields(key) ?? {};
      const owners = this.ranked([
        [entry, told],
        [holder, fields],
      ]);
      const doc = new SharedDoc(owners, { ...told }, Math.max(this.ranks.get(entry)!, this.ranks.get(holder)!));
      this.docs!.set(key, doc);
      this.refresh(key, doc, Object.keys(fields));
    }
  }

  changed(holder: Holder, key: string, before: Fields, after: Fields, shared?: SharedMessage): void {
    const entry = holder.alone ? holder : this.docs!.get(key);
    if (entry instanceof SharedDoc) {
      const told = entry.owners.get(holder);
      if (!told) return;
      entry.owners.set(holder, after);
      const diff = diffFields(told, after);
      if (diff) this.refresh(key, entry, [...Object.keys(diff.fields ?? {}), ...(diff.cleared ?? [])]);
    } else if (entry === holder) {
      if (shared) this.sink.sendEncoded(shared.message());
      else this.sendDiff(key, before, after);
    }
  }

  removed(holder: Holder, key: string, shared?: SharedMessage): void {
    const entry = holder.alone ? holder : this.docs!.get(key);
    if (entry instanceof SharedDoc) {
      const told = entry.owners.get(holder);
      if (!told) return;
      entry.owners.delete(holder);
      if (entry.owners.size > 1) this.refresh(key, entry, Object.keys(told));
      else {
        const [last, fields] = entry.owners.entries().next().value!;
        this.docs!.set(key, last);
        this.sendDiff(key, entry.sent, fields);
      }
    } else if (entry === holder) {
      this.docs?.delete(key);
      this.sink.sendEncoded(shared ? shared.message() : encodeRemoved(this.name, key));
    }
  }

  private ranked(owners: Array<[Holder, Fields]>): Map<Holder, Fields> {
    return new Map(owners.sort(([a], [b]) => this.ranks.get(a)! - this.ranks.get(b)!));
  }

  /** Brings the client's copy of `names` up to what the owners now publish. */
  private refresh(key: string, doc: SharedDoc, names: Iterable<string>): void {
    const before: Fields = {};
    const after: Fields = {};
    for (const name of names) {
      if (name in doc.sent) before[name] = doc.sent[name];
      const value = winning(doc.owners, name);
      if (value === ABSENT) delete doc.sent[name];
      else after[name] = doc.sent[name] = value;
    }
    this.sendDiff(key, before, after);
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
