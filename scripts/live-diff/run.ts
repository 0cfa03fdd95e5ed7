/**
 * The differential run: several simpleddp clients (npm; not ours) subscribe to
 * many query shapes at once, some sharing a connection (the merge box), while
 * bursts of random writes go through Perseid and, where the database allows,
 * behind its back. After each burst and a method round trip on every
 * connection, each connection's documents must equal what fresh queries of the
 * database return (merged over its subscriptions; MongoDB leaves the order of
 * ties open, so a window may show any of the documents tied at its edge), and a
 * client sorting a sorted subscription's documents must see the database's
 * order; a difference that outlasts the change source's lag is a divergence.
 */
import { isDeepStrictEqual } from 'node:util';
import { resolve } from 'mingo/util';
import SimpleDDP from 'simpleddp';
import WebSocket from 'ws';
import { compileSort, compileStableSort } from '../../src/query/sort.js';
import { createWithSeeds } from '../../src/ddp/random.js';
import { Model, SHAPES, type Doc, type Shape, type WriteOp } from './model.js';
import { openTarget, type OpenTarget, type TargetName } from './targets.js';

export interface DiffOptions {
  target: TargetName;
  seed: string;
  /** Bursts of writes, each followed by a comparison. */
  steps: number;
  /** Client connections; the first holds several overlapping subscriptions. */
  connections: number;
  /** Documents ids are drawn from (fewer: more collisions). */
  ids: number;
  /** Interrupt the change source every this many bursts (0: never). */
  interruptEvery: number;
  /** First port to listen on (0: any). */
  port: number;
  progress?: (line: string) => void;
  /** Told each burst's writes and subscription changes, and at a divergence what the client and the database hold. */
  trace?: (line: string) => void;
}

export const DEFAULT_DIFF_OPTIONS: Omit<DiffOptions, 'target'> = { seed: 'live-diff', steps: 40, connections: 5, ids: 30, interruptEvery: 7, port: 0 };

export interface Divergence {
  step: number;
  connection: number;
  shapes: string[];
  problem: string;
}

export interface DiffReport {
  target: TargetName;
  seed: string;
  steps: number;
  writes: number;
  directWrites: number;
  subscriptions: number;
  checks: number;
  interrupts: number;
  /** Longest a burst took to show on every client after its method round trips. */
  slowestSettleMs: number;
  divergences: Divergence[];
  elapsedMs: number;
}

interface Sub {
  shape: Shape;
  handle: ReturnType<SimpleDDP['subscribe']>;
}

interface Client {
  ddp: SimpleDDP;
  subs: Sub[];
}

/** Shapes a client is not subscribed to: a client shares one subscription among identical ones, as Meteor's does. */
function unsubscribed(client: Client): Shape[] {
  return SHAPES.filter((shape) => !client.subs.some((sub) => sub.shape === shape));
}

/** The documents a client holds in `collection`, by id, as `_id` + fields. */
function held(ddp: SimpleDDP, collection: string): Map<string, Doc> {
  const out = new Map<string, Doc>();
  for (const { id, ...fields } of ddp.collection<Doc & { id: string }>(collection).fetch()) out.set(id, fields);
  return out;
}

/** What is wrong with a connection's documents given what each of its subscriptions should show; undefined when nothing. */
export function compareView(seen: Map<string, Doc>, results: Expected[]): string | undefined {
  const problems: string[] = [];
  // Field → every value a subscription that shows (or may show) the document publishes (a merge box shows any of them).
  const values = new Map<string, Map<string, unknown[]>>();
  const certain = new Set<string>();
  for (const { docs, sure } of results) {
    for (const [id, { _id: _ignored, ...fields }] of docs) {
      if (sure.has(id)) certain.add(id);
      let entry = values.get(id);
      if (!entry) values.set(id, (entry = new Map()));
      for (const [field, value] of Object.entries(fields)) entry.set(field, [...(entry.get(field) ?? []), value]);
    }
  }
  for (const [id, doc] of seen) if (!values.has(id)) problems.push(`${id} is shown but no query selects it: ${JSON.stringify(doc)}`);
  for (const id of certain) if (!seen.has(id)) problems.push(`${id} is missing: ${JSON.stringify(Object.fromEntries([...values.get(id)!].map(([f, v]) => [f, v[0]])))}`);
  for (const [id, doc] of seen) {
    const fields = values.get(id);
    if (!fields) continue;
    for (const [field, value] of Object.entries(doc)) {
      const allowed = fields.get(field);
      if (!allowed) problems.push(`${id}.${field} is shown (${JSON.stringify(value)}) but not selected`);
      else if (!allowed.some((v) => isDeepStrictEqual(v, value))) problems.push(`${id}.${field} is ${JSON.stringify(value)}, want ${JSON.stringify(allowed[0])}`);
    }
    // Fields of a subscription that surely shows the document must be there.
    for (const { docs, sure } of results) {
      if (!sure.has(id)) continue;
      for (const field of Object.keys(docs.get(id)!)) if (field !== '_id' && !(field in doc)) problems.push(`${id}.${field} is missing (want ${JSON.stringify(docs.get(id)![field])})`);
    }
  }
  for (const { shape, ties } of results) {
    for (const { ids, need } of ties) {
      const shown = ids.filter((id) => seen.has(id)).length;
      // Alone on its connection, the subscription must show exactly its share of the tie; else at least it.
      if (results.length === 1 ? shown !== need : shown < need) problems.push(`${shape.name}: shows ${shown} of the tied ${ids.join(' ')}, want ${need}`);
    }
  }
  if (problems.length > 0) return problems.slice(0, 6).join('; ');
  // A client sorting each sorted subscription's documents must show the database's order (ties in any order).
  for (const { shape, docs, sure, rank } of results) {
    if (!shape.sort || !sortable(shape, results.length === 1)) continue;
    // A tied document may be shown for another subscription, with fields this one does not publish.
    const mine = [...docs.keys()].filter((id) => seen.has(id) && (sure.has(id) || results.length === 1));
    const shown = mine.sort((a, b) => compileStableSort(shape.sort!)({ _id: a, ...seen.get(a) }, { _id: b, ...seen.get(b) }));
    if (shown.some((id, i) => i > 0 && rank.get(id)! < rank.get(shown[i - 1]!)!)) {
      const keys = (id: string) => `${id}${JSON.stringify(shape.sort!.map(([key]) => resolve(seen.get(id) ?? {}, key)))}`;
      problems.push(`${shape.name}: a client sorting the documents shows ${shown.map(keys).join(' ')}`);
    }
  }
  return problems.length ? problems.slice(0, 6).join('; ') : undefined;
}

/**
 * Whether a client holds the fields the shape sorts on as the database does. A merge box merges top-level fields, so a
 * nested sort key may come from another subscription's projection of its parent (Meteor's behaviour too).
 */
function sortable(shape: Shape, alone: boolean): boolean {
  if (!alone && shape.sort!.some(([key]) => key.includes('.'))) return false;
  if (!shape.fields) return true;
  const included = Object.values(shape.fields).some((v) => v === 1);
  return shape.sort!.every(([key]) => key === '_id' || (included ? key in shape.fields! : !(key.split('.')[0]! in shape.fields!)));
}

export async function runLiveDiff(options: Partial<DiffOptions> & { target: TargetName }): Promise<DiffReport> {
  const o: DiffOptions = { ...DEFAULT_DIFF_OPTIONS, ...options };
  const started = Date.now();
  const random = createWithSeeds(o.seed, o.target);
  const model = new Model(random, o.ids);
  const name = `diff_${o.seed.replace(/\W/g, '_')}`;
  const target = await openTarget(o.target, name, o.port);
  const report: DiffReport = { target: o.target, seed: o.seed, steps: 0, writes: 0, directWrites: 0, subscriptions: 0, checks: 0, interrupts: 0, slowestSettleMs: 0, divergences: [], elapsedMs: 0 };
  const clients: Client[] = [];
  const connections: SimpleDDP[] = [];
  const connect = async (url: string) => {
    const ddp = new SimpleDDP({ endpoint: url, SocketConstructor: WebSocket, reconnectInterval: 200, maxTimeout: 10000 });
    connections.push(ddp);
    await ddp.connect();
    return ddp;
  };
  try {
    const writer = await connect(target.writerUrl);
    const seeded = new Set<string>();
    const initial: WriteOp[] = [];
    for (let i = 0; i < o.ids * 0.7; i++) {
      const doc = model.doc();
      if (!seeded.has(String(doc._id))) initial.push({ kind: 'insert', doc });
      seeded.add(String(doc._id));
    }
    await writer.call('diff.write', name, initial, false);
    const subscribe = (client: Client, shape: Shape): Sub => {
      report.subscriptions++;
      const sub = { shape, handle: client.ddp.subscribe('diff.view', name, shape) };
      client.subs.push(sub);
      return sub;
    };
    for (let i = 0; i < o.connections; i++) clients.push({ ddp: await connect(target.readerUrl), subs: [] });
    // The first connection: overlapping queries merged on one connection; the others share out every shape.
    for (let i = 0; i < 4; i++) subscribe(clients[0]!, model.pick(unsubscribed(clients[0]!)));
    SHAPES.forEach((shape, i) => subscribe(clients[1 + (i % (o.connections - 1))]!, shape));
    await Promise.all(clients.flatMap((c) => c.subs.map((s) => s.handle.ready())));

    for (let step = 0; step < o.steps; step++) {
      report.steps = step + 1;
      // Subscriptions come and go, some while the writes are under way.
      const pending: Array<Promise<unknown>> = [];
      for (const client of clients) {
        if (client.subs.length > 1 && model.chance(0.15)) {
          const [gone] = client.subs.splice(model.int(client.subs.length), 1);
          // Out of simpleddp's list at once: it hands a new identical subscription the old one, stopped or not.
          pending.push(gone!.handle.stop());
          gone!.handle.remove();
          o.trace?.(`burst ${step + 1}: connection ${clients.indexOf(client)} stops ${gone!.shape.name}`);
        }
        if (model.chance(0.15)) {
          const sub = subscribe(client, model.pick(unsubscribed(client)));
          o.trace?.(`burst ${step + 1}: connection ${clients.indexOf(client)} starts ${sub.shape.name}`);
          pending.push(sub.handle.ready());
        }
      }
      const burst = 1 + model.int(model.chance(0.2) ? 40 : 10);
      const direct = target.direct && model.chance(0.3);
      const ops = Array.from({ length: burst }, () => model.write(Boolean(direct)));
      const interruptAt = o.interruptEvery && step % o.interruptEvery === o.interruptEvery - 1 ? model.int(burst) : -1;
      const together = model.chance(0.4) && target.concurrentWrites;
      o.trace?.(`burst ${step + 1}: ${direct ? 'direct' : together ? 'at once' : 'in turn'}${interruptAt >= 0 ? `, interrupted before write ${interruptAt}` : ''}: ${JSON.stringify(ops)}`);
      if (direct) {
        for (const [i, op] of ops.entries()) {
          if (i === interruptAt) await target.interrupt();
          await target.direct!(op);
        }
        report.directWrites += ops.length;
      } else if (interruptAt >= 0) {
        await writer.call('diff.write', name, ops.slice(0, interruptAt), together);
        await target.interrupt();
        await writer.call('diff.write', name, ops.slice(interruptAt), together);
      } else {
        await writer.call('diff.write', name, ops, together);
      }
      if (interruptAt >= 0) report.interrupts++;
      report.writes += ops.length;
      await Promise.all(pending);
      await Promise.all(clients.map((c) => c.ddp.call('diff.sync')));
      const { divergences, ms } = await settle(target, clients, name, step, o.trace);
      report.slowestSettleMs = Math.max(report.slowestSettleMs, ms);
      report.checks += clients.length;
      o.progress?.(`[live-diff] ${o.target} seed ${o.seed}: burst ${step + 1}/${o.steps}, ${report.writes} writes (${report.directWrites} direct), ${clients.reduce((n, c) => n + c.subs.length, 0)} subscriptions, ${report.interrupts} interrupts, slowest settle ${report.slowestSettleMs} ms, ${((Date.now() - started) / 1000).toFixed(1)} s`);
      if (divergences.length) {
        report.divergences.push(...divergences);
        break;
      }
    }
  } finally {
    for (const ddp of connections) await ddp.disconnect().catch(() => undefined);
    await target.close();
    report.elapsedMs = Date.now() - started;
  }
  return report;
}

/**
 * What a subscription should show, from a fresh query. MongoDB leaves the order of ties open: where a run of documents
 * that sort alike straddles the edge of a window, any `need` of them (`ties`) may be shown.
 */
export interface Expected {
  shape: Shape;
  /** Projected documents it shows or may show, by id. */
  docs: Map<string, Doc>;
  /** Those it surely shows. */
  sure: Set<string>;
  ties: Array<{ ids: string[]; need: number }>;
  /** Sorted shapes: each document's place in the database's order, ties sharing one. */
  rank: Map<string, number>;
}

export async function expected(target: OpenTarget, shape: Shape): Promise<Expected> {
  const rank = new Map<string, number>();
  const byId = (docs: Doc[]) => new Map(docs.map((d) => [String(d._id), d]));
  if (!shape.sort) {
    const docs = byId(await target.find(shape.selector, { fields: shape.fields }));
    return { shape, docs, sure: new Set(docs.keys()), ties: [], rank };
  }
  const all = await target.find(shape.selector, { sort: shape.sort });
  const compare = compileSort(shape.sort);
  const start = shape.skip ?? 0;
  const end = shape.limit ? start + shape.limit : all.length;
  const sure = new Set<string>();
  const ties: Expected['ties'] = [];
  for (let g0 = 0, place = 0; g0 < all.length; place++) {
    let g1 = g0 + 1;
    while (g1 < all.length && compare(all[g0]!, all[g1]!) === 0) g1++;
    const run = all.slice(g0, g1).map((d) => String(d._id));
    for (const id of run) rank.set(id, place);
    const need = Math.min(g1, end) - Math.max(g0, start);
    if (need === run.length) for (const id of run) sure.add(id);
    else if (need > 0) ties.push({ ids: run, need });
    g0 = g1;
  }
  const ids = [...sure, ...ties.flatMap((t) => t.ids)];
  const docs = byId(await target.find({ _id: { $in: ids } }, { fields: shape.fields }));
  return { shape, docs, sure, ties, rank };
}

/**
 * Compares every connection with fresh queries until they agree or the change source's lag has passed; says how
 * long agreement took.
 */
async function settle(target: OpenTarget, clients: Client[], name: string, step: number, trace: DiffOptions['trace']): Promise<{ divergences: Divergence[]; ms: number }> {
  const started = Date.now();
  for (;;) {
    const found: Divergence[] = [];
    const last = Date.now() > started + target.lagMs;
    for (const [i, client] of clients.entries()) {
      const seen = held(client.ddp, name);
      const results = await Promise.all(client.subs.map(({ shape }) => expected(target, shape)));
      const problem = compareView(seen, results);
      if (!problem) continue;
      found.push({ step, connection: i, shapes: client.subs.map((s) => s.shape.name), problem });
      if (last) trace?.(`connection ${i} shows ${JSON.stringify([...seen])}; the database holds ${JSON.stringify(await target.find({}, {}))}`);
    }
    if (found.length === 0 || last) return { divergences: found, ms: Date.now() - started };
    await new Promise((r) => setTimeout(r, 50));
  }
}
