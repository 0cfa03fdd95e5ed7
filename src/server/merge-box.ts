/**
 * The per-connection merge box (DDP notes §4.1): when several subscriptions of
 * one connection publish the same document, the client sees one document whose
 * fields are the union, and nothing is sent twice or dropped.
 *
 * Unlike Meteor's, it keeps no copy of the documents. Every holder (one cursor
 * of a subscription, or one collection of a subscription using the low-level
 * API) publishes from a source that gives its fields for a document: a
 * cursor's is its live query, shared by every subscription to the same query.
 * A holder alone in its collection sends its changes as the live query's
 * shared, already serialised message. Once a second holder joins, the view
 * keeps an index of which sources have told it of each document, counting the
 * holders of each (what a live query holds can be ahead of what its
 * subscribers were told, while it tells them in turn), and for a document two
 * or more sources publish, the union the client has. Holders of one source
 * publish the same fields, so a hundred identical subscriptions cost a count
 * per document, and every step costs the fields it touches.
 *
 * Field precedence: where sources disagree on a field, the one whose first
 * holder among those merging came earliest wins (for cursors, the earliest
 * subscription to the query).
 */
import { encodeAdded, encodeChanged, encodeRemoved, type EncodedMessage } from '../ddp/encoded.js';
import { diffFields, type Fields } from '../reactive/doc-change.js';

/** What a holder publishes from: its fields for a document as they are now. */
export interface FieldSource {
  fields(key: string): Fields | undefined;
}

export interface Holder {
  /**
   * Set by its view: no other holder of the collection to merge with (it is
   * the only one, or the collection is not merged), so its changes may go to
   * the connection as they are. Every change goes this way for every
   * subscriber, and this spares it a look at the view.
   */
  alone: boolean;
  /** Holders with the same source publish the same fields. */
  readonly source: FieldSource;
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

/** A source that has told the view of a document, through `count` of its holders. */
class Told {
  constructor(
    readonly source: FieldSource,
    public count: number,
    /** The fields of the last change handled for it, so the source's other holders do not handle that change again. */
    public sentFields: Fields | undefined,
  ) {}
}

/** A document two or more sources publish: them, in precedence order, and the union the client has. */
class SharedDoc {
  constructor(
    public owners: Map<FieldSource, Told>,
    readonly sent: Fields,
    /** Rank of the latest source to join; a source ranked above it joins at the end. */
    public lastRank: number,
  ) {}
}

const ABSENT = Symbol('absent');

/** The value of `name` the client should see: the first owner's that has the field. */
function winning(owners: Map<FieldSource, Told>, key: string, name: string): unknown {
  for (const source of owners.keys()) {
    const fields = source.fields(key);
    if (fields && name in fields) return fields[name];
  }
  return ABSENT;
}

/** What a view keeps while two or more holders merge (a view with one holder keeps nothing). */
class Merging {
  /** Which sources have told the view of each document. */
  readonly docs = new Map<string, Told | SharedDoc>();
  /** The holders in the order they came (while merging). */
  readonly ranks = new Map<Holder, number>();
  private nextRank = 0;
  /** Each source's precedence (weak: the view must not keep a live query its holders have let go). */
  readonly sourceRanks = new WeakMap<FieldSource, number>();

  ranked(holder: Holder): void {
    this.ranks.set(holder, this.nextRank++);
    this.sourceKnown(holder);
  }

  sourceKnown(holder: Holder): void {
    const rank = this.ranks.get(holder);
    if (rank !== undefined && !this.sourceRanks.has(holder.source)) this.sourceRanks.set(holder.source, rank);
  }
}

/** One collection of one connection's merge box: what its holders publish, merged. */
export class CollectionView {
  private holders: Holder[] = [];
  private merging: Merging | undefined;

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
    this.merging?.ranked(holder);
  }

  remove(holder: Holder): void {
    holder.alone = false;
    this.merging?.ranks.delete(holder);
    this.setHolders(this.holders.filter((h) => h !== holder));
  }

  private setHolders(holders: Holder[]): void {
    const merging = holders.length > 1 && this.strategy === 'SERVER_MERGE';
    if (merging && !this.merging) {
      // The holder that was alone has told the client of everything it publishes; it ranks first.
      this.merging = new Merging();
      for (const holder of this.holders) {
        this.merging.ranked(holder);
        holder.forEach((key, fields) => this.merging!.docs.set(key, new Told(holder.source, 1, fields)));
      }
    } else if (!merging) this.merging = undefined;
    this.holders = holders;
    for (const holder of holders) holder.alone = !merging;
  }

  /**
   * `holder` publishes from its source now (a cursor's once its live query is
   * attached): while holders merge, a source ranks by its first holder among them.
   */
  sourceKnown(holder: Holder): void {
    this.merging?.sourceKnown(holder);
  }

  /**
   * `holder` now publishes `key` with `fields`. `shared` gives the message to
   * send when no other source has the document.
   */
  added(holder: Holder, key: string, fields: Fields, shared?: SharedMessage): void {
    if (holder.alone) {
      this.sink.sendEncoded(shared ? shared.message() : encodeAdded(this.name, key, fields));
      return;
    }
    // A holder that has left (its subscription stopped while its live query was still loading) tells nothing.
    const merging = this.merging;
    if (!merging?.ranks.has(holder)) return;
    const { docs } = merging;
    const { source } = holder;
    const entry = docs.get(key);
    if (entry === undefined) {
      docs.set(key, new Told(source, 1, fields));
      this.sink.sendEncoded(shared ? shared.message() : encodeAdded(this.name, key, fields));
    } else if (entry instanceof Told) {
      if (entry.source === source) {
        entry.count++;
        return;
      }
      const lastRank = Math.max(this.rankOf(entry.source), this.rankOf(source));
      const doc = new SharedDoc(this.ranked([entry, new Told(source, 1, undefined)]), { ...entry.source.fields(key) }, lastRank);
      docs.set(key, doc);
      this.refresh(key, doc, Object.keys(fields));
    } else {
      const told = entry.owners.get(source);
      if (told) {
        told.count++;
        return;
      }
      const rank = this.rankOf(source);
      if (rank > entry.lastRank) {
        // Joining last, it can only add fields no earlier source has.
        entry.owners.set(source, new Told(source, 1, undefined));
        entry.lastRank = rank;
        this.refresh(key, entry, Object.keys(fields).filter((name) => !(name in entry.sent)));
      } else {
        entry.owners = this.ranked([...entry.owners.values(), new Told(source, 1, undefined)]);
        this.refresh(key, entry, Object.keys(fields));
      }
    }
  }

  changed(holder: Holder, key: string, before: Fields, after: Fields, shared?: SharedMessage): void {
    if (holder.alone) {
      if (shared) this.sink.sendEncoded(shared.message());
      else this.sendDiff(key, before, after);
      return;
    }
    const merging = this.merging;
    if (!merging?.ranks.has(holder)) return;
    const entry = merging.docs.get(key);
    const { source } = holder;
    const told = entry instanceof Told ? (entry.source === source ? entry : undefined) : entry?.owners.get(source);
    // The source's other holders get the same change: it is handled once.
    if (!told || told.sentFields === after) return;
    told.sentFields = after;
    if (entry instanceof Told) {
      if (shared) this.sink.sendEncoded(shared.message());
      else this.sendDiff(key, before, after);
    } else {
      const diff = diffFields(before, after);
      if (diff) this.refresh(key, entry!, [...Object.keys(diff.fields ?? {}), ...(diff.cleared ?? [])]);
    }
  }

  removed(holder: Holder, key: string, before: Fields, shared?: SharedMessage): void {
    if (holder.alone) {
      this.sink.sendEncoded(shared ? shared.message() : encodeRemoved(this.name, key));
      return;
    }
    const merging = this.merging;
    if (!merging?.ranks.has(holder)) return;
    const { docs } = merging;
    const entry = docs.get(key);
    const { source } = holder;
    if (entry instanceof Told) {
      if (entry.source !== source || --entry.count > 0) return;
      docs.delete(key);
      this.sink.sendEncoded(shared ? shared.message() : encodeRemoved(this.name, key));
      return;
    }
    const told = entry?.owners.get(source);
    if (!entry || !told || --told.count > 0) return;
    entry.owners.delete(source);
    if (entry.owners.size > 1) {
      this.refresh(key, entry, Object.keys(before));
      return;
    }
    const [last] = entry.owners.values();
    const fields = last!.source.fields(key) ?? {};
    last!.sentFields = fields;
    docs.set(key, last!);
    this.sendDiff(key, entry.sent, fields);
  }

  private rankOf(source: FieldSource): number {
    return this.merging!.sourceRanks.get(source)!;
  }

  private ranked(owners: Told[]): Map<FieldSource, Told> {
    return new Map(owners.sort((a, b) => this.rankOf(a.source) - this.rankOf(b.source)).map((told) => [told.source, told]));
  }

  /** Brings the client's copy of `names` up to what the owners now publish. */
  private refresh(key: string, doc: SharedDoc, names: Iterable<string>): void {
    const before: Fields = {};
    const after: Fields = {};
    for (const name of names) {
      if (name in doc.sent) before[name] = doc.sent[name];
      const value = winning(doc.owners, key, name);
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
