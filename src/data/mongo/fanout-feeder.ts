/**
 * Cross-server fan-out (redis-oplog's model): a write made through this server
 * is applied to its own live queries at once and published on the collection's
 * channel and the document's channel; every server subscribes only to the
 * channels its live queries need (a collection's, or just some documents'
 * when every live query of that collection names its ids). Changes made
 * outside Perseid reach the bus through one elected server's relay.
 *
 * A message: {"s": server, "c": collection, "o": "i"|"u"|"r"|"s", "i": id,
 * "d": document, "m": modifier, "r": 1 when relayed from the database} with
 * EJSON values. "s" (op) is a resync of the collection (dropped, or changed in
 * a way nobody saw: "g": 1 when a server could not send its changes); it goes
 * on the database's control channel, which every server hears whichever
 * documents it follows, as does "w": a server has begun to watch the
 * collection (so the relay follows it now, not at its next check).
 */
import { parse, stringify } from '../../ddp/ejson.js';
import { idStringify } from '../../ddp/ids.js';
import type { Logger } from '../../log.js';
import { fanoutMetrics } from '../../fanout/fanout-metrics.js';
import type { FanoutBus } from '../../fanout/bus.js';
import type { ChangeOp } from '../change-source.js';
import type { Document } from '../types.js';
import type { ChangeHub } from './change-hub.js';

interface Wire {
  s: string;
  c: string;
  o: 'i' | 'u' | 'r' | 's' | 'w';
  i?: unknown;
  d?: Document;
  m?: Document;
  r?: 1;
  g?: 1;
}

/** How soon a resync order for changes that could not be sent is tried (again, while the bus is down). */
const RESYNC_ORDER_RETRY_MS = 200;

const OPS: Record<ChangeOp, Wire['o']> = { insert: 'i', update: 'u', remove: 'r' };
const CHANGE_OPS: Record<'i' | 'u' | 'r', ChangeOp> = { i: 'insert', u: 'update', r: 'remove' };
const WIRE_OPS = { ...CHANGE_OPS, s: 'resync', w: 'watching' };

export interface PublishedChange {
  op: ChangeOp;
  id: unknown;
  doc?: Document;
  modifier?: Document;
}

export class FanoutFeeder {
  /** Channel → unsubscribe, per collection. */
  private readonly subscribed = new Map<string, Map<string, () => void>>();
  /** The channels each collection needs now (subscriptions catch up with it). */
  private readonly wanted = new Map<string, Set<string>>();
  private readonly unsubscribeControl: () => void;
  /** How this server's own writes begin on the wire (`s` first). */
  private readonly ownPrefix: string;
  /** Called when this server begins to watch a collection. */
  onWatchStarted: (collection: string) => void = () => undefined;
  /** Called when another server says it has begun to watch a collection. */
  onWatchedElsewhere: () => void = () => undefined;
  /** Collections whose changes did not go out (the bus was down), with whether a relayed one did: resyncs to order. */
  private readonly unsent = new Map<string, boolean>();
  private ordering: NodeJS.Timeout | undefined;

  constructor(
    private readonly hub: ChangeHub,
    private readonly bus: FanoutBus,
    /** Channels are named after the database, so apps sharing a Redis do not hear each other. */
    private readonly database: string,
    private readonly serverId: string,
    private readonly log: Logger,
  ) {
    this.ownPrefix = `{"s":${JSON.stringify(serverId)},`;
    hub.onInterest = (collection, ids) => this.follow(collection, ids);
    hub.onWatchedChange = (collections) => {
      for (const collection of [...this.subscribed.keys()]) if (!collections.has(collection)) this.follow(collection, new Set());
      for (const collection of collections) {
        if (this.subscribed.has(collection)) continue;
        this.follow(collection, 'all');
        this.onWatchStarted(collection);
      }
    };
    hub.ready = async (collection) => {
      await Promise.all([...(this.subscribed.get(collection)?.keys() ?? [])].map((channel) => bus.whenSubscribed(channel)));
    };
    bus.onReconnect(() => hub.resync('fan-out bus reconnected'));
    this.unsubscribeControl = bus.subscribe(this.controlChannel(), (text) => this.receive(text));
  }

  /** Resolves once this server hears the bus (startup waits for it). */
  whenListening(): Promise<void> {
    return this.bus.whenSubscribed(this.controlChannel());
  }

  private controlChannel(): string {
    return `perseid:${this.database}:!control`;
  }

  channel(collection: string, id?: unknown): string {
    const base = `perseid:${this.database}:${collection}`;
    return id === undefined ? base : `${base}::${idStringify(id)}`;
  }

  /** Changes written by this server: applied here now, published for the others. */
  published(collection: string, changes: readonly PublishedChange[] | 'resync'): void {
    if (changes === 'resync') {
      this.hub.resync('collection dropped', collection);
      this.bus.publish(this.controlChannel(), stringify({ s: this.serverId, c: collection, o: 's' }));
      return;
    }
    for (const change of changes) {
      this.apply(collection, change);
      this.send({ s: this.serverId, c: collection, o: OPS[change.op], i: change.id, d: change.doc, m: change.modifier });
    }
  }

  /** A change the relay read from the database (any writer): everyone applies it, this server too. */
  relayed(collection: string, change: PublishedChange | 'resync'): void {
    // `r` leads, so that the relay's own messages do not look like its writes' echoes (see receive).
    if (change === 'resync') this.bus.publish(this.controlChannel(), stringify({ r: 1, s: this.serverId, c: collection, o: 's' }));
    else this.send({ r: 1, s: this.serverId, c: collection, o: OPS[change.op], i: change.id, d: change.doc, m: change.modifier });
  }

  /** Tells every server that this one now watches `collection` (once it has said so where the relay reads the watched set). */
  watching(collection: string): void {
    this.bus.publish(this.controlChannel(), stringify({ s: this.serverId, c: collection, o: 'w' }));
  }

  close(): void {
    clearTimeout(this.ordering);
    this.unsubscribeControl();
    for (const channels of this.subscribed.values()) for (const unsubscribe of channels.values()) unsubscribe();
    this.subscribed.clear();
    this.wanted.clear();
  }

  private send(wire: Wire): void {
    const text = stringify(wire);
    const lost = () => this.lost(wire.c, wire.r === 1);
    this.bus.publish(this.channel(wire.c), text, lost);
    this.bus.publish(this.channel(wire.c, wire.i), text, lost);
  }

  /**
   * A change of `collection` could not be sent: the other servers never get it, and nothing tells them (their own
   * connections may never have dropped). Once the bus takes messages again, they are told to re-read it; so is this
   * server when the change was relayed, since it applies relayed changes as they come back from the bus.
   */
  private lost(collection: string, relayed: boolean): void {
    this.unsent.set(collection, relayed || (this.unsent.get(collection) ?? false));
    if (this.ordering) return;
    this.ordering = setTimeout(() => {
      this.ordering = undefined;
      for (const [c, r] of this.unsent) {
        this.unsent.delete(c);
        // `r` first for everyone, this server too; else `s` first, which this server skips as its own.
        const order = r ? { r: 1, s: this.serverId, c, o: 's', g: 1 } : { s: this.serverId, c, o: 's', g: 1 };
        this.bus.publish(this.controlChannel(), stringify(order), () => this.lost(c, r));
      }
    }, RESYNC_ORDER_RETRY_MS);
    this.ordering.unref();
  }

  private receive(text: string): void {
    // The echo of this server's own write, already applied when it was made: dropped unparsed.
    if (text.startsWith(this.ownPrefix)) return;
    let wire: Wire;
    try {
      wire = parse(text) as Wire;
    } catch (error) {
      this.log.warn('unreadable fan-out message; ignored', { error: (error as Error).message });
      return;
    }
    if (typeof wire !== 'object' || wire === null || typeof wire.c !== 'string' || !(wire.o in WIRE_OPS)) {
      this.log.warn('malformed fan-out message; ignored', { message: text.slice(0, 200) });
      return;
    }
    if (wire.o === 'w') {
      this.onWatchedElsewhere();
      return;
    }
    fanoutMetrics.applied.inc();
    if (wire.o === 's') fanoutMetrics.resyncs.inc();
    if (wire.o === 's') this.hub.resync(wire.g ? 'changes a server could not send' : wire.r ? 'the relay lost track of the database' : 'collection dropped on another server', wire.c);
    else this.apply(wire.c, { op: CHANGE_OPS[wire.o], id: wire.i, doc: wire.d, modifier: wire.m });
  }

  /**
   * Writes reach the bus in the order their answers came back, not in the database's: two at once on
   * one document (an insert and a replacement, an update and a remove) can come the other way round.
   * An insert after an update of its document, or a whole document after its removal, is then not
   * applied as it stands: the document is read again by id. (An insert after the same insert is the
   * relay's copy of a write through Perseid: applied again, to the same effect.)
   */
  private apply(collection: string, change: PublishedChange): void {
    const last = change.doc === undefined ? undefined : this.hub.lastChange(collection, change.id);
    const stale = last === 'remove' ? change.op !== 'remove' : change.op === 'insert' && last === 'update';
    this.hub.emit(stale ? { collection, op: 'update', id: change.id } : { collection, ...change });
  }

  /**
   * Subscribes to exactly the channels `ids` needs for `collection` (all of it,
   * some documents, or none). Channels no longer needed are dropped only once
   * the new ones are confirmed, so that no change falls between the two.
   */
  private follow(collection: string, ids: ReadonlySet<string> | 'all'): void {
    const want = new Set(ids === 'all' ? [this.channel(collection)] : [...ids].map((key) => `${this.channel(collection)}::${key}`));
    this.wanted.set(collection, want);
    const current = this.subscribed.get(collection) ?? new Map<string, () => void>();
    this.subscribed.set(collection, current);
    const added: string[] = [];
    for (const channel of want) {
      if (current.has(channel)) continue;
      current.set(channel, this.bus.subscribe(channel, (text) => this.receive(text)));
      added.push(channel);
    }
    void Promise.all(added.map((channel) => this.bus.whenSubscribed(channel))).then(() => this.dropUnwanted(collection));
  }

  private dropUnwanted(collection: string): void {
    const want = this.wanted.get(collection);
    const current = this.subscribed.get(collection);
    if (!current) return;
    for (const [channel, unsubscribe] of current) {
      if (want?.has(channel)) continue;
      unsubscribe();
      current.delete(channel);
    }
    if (current.size === 0) {
      this.subscribed.delete(collection);
      if (want?.size === 0) this.wanted.delete(collection);
    }
  }
}
