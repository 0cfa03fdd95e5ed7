/**
 * Choosing how to follow a MongoDB database: oplog tailing, change streams (for
 * the whole database, or per collection where that is all the server offers),
 * or polling. Used by a store for its own live queries, and by the fan-out relay.
 */
import type { Db } from 'mongodb';
import type { Logger } from '../../log.js';
import { ChangeSourceUnavailableError, type ChangeSourceKind } from '../change-source.js';
import type { ChangeHub } from './change-hub.js';
import type { ClientHolder } from './client-holder.js';
import { ChangeStreamFeeder, type StreamScope } from './change-stream-feeder.js';
import { OplogFeeder } from './oplog-feeder.js';
import { PollFeeder } from './poll-feeder.js';

export type DatabaseFeeder = ChangeStreamFeeder | OplogFeeder | PollFeeder;
export type DatabaseSourceChoice = 'auto' | 'change-stream' | 'oplog' | 'poll';

export interface OpenedFeeder {
  feeder: DatabaseFeeder;
  name: string;
  kind: ChangeSourceKind;
  reason: string;
  /** Whether the feeder reports changes by document id (fences then wait for those ids). */
  tracksIds: boolean;
}

const PROBE_COLLECTION = 'perseid_change_probe';
const PROBE_PAUSE_MS = 10;

/** Whether a change stream of `scope` delivers a write made after it opened, within `ms`. */
async function streamDelivers(db: Db, scope: StreamScope, ms: number): Promise<boolean> {
  const probe = db.collection(PROBE_COLLECTION);
  let stream;
  try {
    stream = scope === 'database' ? db.watch([{ $match: { 'ns.coll': PROBE_COLLECTION } }]) : probe.watch();
    // Empty reads are spaced out: a server that answers them at once (mongo-java-server) would otherwise be asked thousands of times.
    const event = stream.tryNext().then(async function next(first): Promise<unknown> {
      if (first) return first;
      await new Promise((r) => setTimeout(r, PROBE_PAUSE_MS));
      return stream!.closed ? undefined : next(await stream!.tryNext());
    });
    // tryNext() has opened the stream on the server once its first round trip is back.
    await Promise.race([event, new Promise((r) => setTimeout(r, 200))]);
    await probe.insertOne({ at: new Date() });
    return await Promise.race([event.then(Boolean), new Promise<boolean>((r) => setTimeout(() => r(false), ms))]);
  } catch {
    return false;
  } finally {
    await stream?.close().catch(() => undefined);
  }
}

export async function openDatabaseFeeder(
  hub: ChangeHub,
  clients: ClientHolder,
  oplogClients: ClientHolder | undefined,
  choice: DatabaseSourceChoice,
  pollIntervalMs: number,
  log: Logger,
): Promise<OpenedFeeder> {
  const db = clients.db;
  if (choice === 'oplog' || (choice === 'auto' && oplogClients)) {
    if (!oplogClients) throw new Error('The oplog change source needs MONGO_OPLOG_URL');
    const feeder = new OplogFeeder(oplogClients, db.databaseName, hub, { minIntervalMs: 20, maxIntervalMs: 200 }, log);
    await feeder.start();
    return { feeder, name: 'oplog tailing', kind: 'oplog', reason: choice === 'oplog' ? 'chosen' : 'MONGO_OPLOG_URL is set', tracksIds: true };
  }
  if (choice === 'change-stream' || choice === 'auto') {
    const scope: StreamScope | undefined = (await streamDelivers(db, 'database', 1500))
      ? 'database'
      : (await streamDelivers(db, 'collection', 1500))
        ? 'collection'
        : undefined;
    await db.collection(PROBE_COLLECTION).drop().catch(() => undefined);
    if (scope) {
      const feeder = new ChangeStreamFeeder(clients, hub, scope, log);
      hub.ready = (collection) => feeder.streaming(collection);
      return scope === 'database'
        ? { feeder, name: 'a database change stream', kind: 'change-stream', reason: 'the server streams database changes', tracksIds: true }
        : { feeder, name: 'per-collection change streams', kind: 'change-stream', reason: 'the server streams collection changes only', tracksIds: true };
    }
    if (choice === 'change-stream') {
      throw new ChangeSourceUnavailableError('this MongoDB server does not deliver change streams, which need a replica set: run it as one, or set PERSEID_CHANGE_SOURCE to oplog (with MONGO_OPLOG_URL), poll or auto');
    }
  }
  return { feeder: new PollFeeder(hub, pollIntervalMs), name: 'polling', kind: 'polling', reason: choice === 'poll' ? 'chosen' : 'no change streams and no MONGO_OPLOG_URL', tracksIds: false };
}
