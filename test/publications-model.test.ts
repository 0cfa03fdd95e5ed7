/**
 * Publications over the wire against a model: one connection subscribes and
 * unsubscribes at random to a publication whose cursors differ in filter and
 * fields, some also adding documents by hand (a cursor may publish the same
 * ones), through writes and logins (which re-run every subscription). After
 * every step the documents the client holds, applying the messages as a strict
 * client does, must be the union of what its subscriptions publish now.
 * Values never conflict (cursors publish the stored ones, each subscription
 * adds a field of its own by hand), so precedence does not enter.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import type { Collection } from '../src/collections/collection.js';
import { RawPeer, seededRandom, startServer, type Message, type TestServer } from './helpers.js';

interface Spec {
  /** Only the user's documents (none when logged out), else all or group `group`. */
  mine: boolean;
  group?: number;
  fields: string[];
  /** Documents it adds by hand, with a field named after it. */
  byHand: number[];
  /** Whether it also returns its cursor. */
  cursor: boolean;
  tag: string;
}

interface Item {
  _id: string;
  owner: string | null;
  group: number;
  [field: string]: unknown;
}

type Fields = Record<string, unknown>;

const USERS = [null, 'u1', 'u2'];
const FIELDS = ['a', 'b', 'c'];
const DOCS = 6;

describe('publications against a model, through writes and logins', () => {
  let t: TestServer;
  let items: Collection<Item>;
  before(async () => {
    t = await startServer((server, { collection }) => {
      items = collection<Item>('items');
      server.publish('view', function (spec: unknown) {
        const s = spec as Spec;
        for (const n of s.byHand) this.added('items', `d${n}`, { [s.tag]: this.userId ?? 'anonymous' });
        if (!s.cursor) return this.ready();
        const selector = s.mine ? { owner: this.userId } : s.group === undefined ? {} : { group: s.group };
        return items.find(selector, { fields: Object.fromEntries(s.fields.map((name) => [name, 1])) });
      });
      server.methods({
        async login(this: { setUserId(id: string | null): Promise<void> }, id: unknown) {
          await this.setUserId(id as string | null);
        },
        set: (id: unknown, fields: unknown) => items.updateAsync(id as string, { $set: fields as Fields }),
        unset: (id: unknown, field: unknown) => items.updateAsync(id as string, { $unset: { [field as string]: 1 } }),
      });
    });
  });
  after(() => t.close());

  for (const seed of [1, 2, 3]) {
    it(`shows the union of what the subscriptions publish after every step (seed ${seed})`, async () => {
      await items.removeAsync({});
      for (let i = 0; i < DOCS; i++) await items.insertAsync({ _id: `d${i}`, owner: USERS[i % 3]!, group: i % 2, a: i, b: [i], c: `c${i}` });
      const next = seededRandom(seed);
      const below = (n: number) => Math.floor(next() * n);
      const peer = await RawPeer.connected(t.wsUrl);
      const client = new Map<string, Fields>();
      let applied = 0;
      const subs = new Map<string, Spec>();
      let user: string | null = null;
      let counter = 0;

      const expected = async () => {
        const out = new Map<string, Fields>();
        const doc = (id: string) => out.get(id) ?? out.set(id, {}).get(id)!;
        for (const item of await items.find().fetchAsync()) {
          for (const spec of subs.values()) {
            const shown = spec.mine ? item.owner === user : spec.group === undefined || item.group === spec.group;
            if (!spec.cursor || !shown) continue;
            for (const name of spec.fields) if (name in item) doc(item._id)[name] = item[name];
          }
        }
        for (const spec of subs.values()) for (const n of spec.byHand) doc(`d${n}`)[spec.tag] = user ?? 'anonymous';
        return out;
      };

      for (let step = 0; step < 150; step++) {
        const roll = next();
        const id = `d${below(DOCS + 2)}`;
        if (roll < 0.3 && subs.size < 5) {
          const subId = `s${counter++}`;
          const spec: Spec = { mine: next() < 0.3, fields: FIELDS.filter(() => next() < 0.5).concat('owner'), byHand: next() < 0.5 ? [below(DOCS + 2), below(DOCS + 2)] : [], cursor: next() < 0.7, tag: `h${subId}` };
          if (!spec.mine && next() < 0.5) spec.group = below(2);
          subs.set(subId, spec);
          peer.send({ msg: 'sub', id: subId, name: 'view', params: [spec] });
          await peer.next((m) => m.msg === 'ready' && (m.subs as string[]).includes(subId));
        } else if (roll < 0.45 && subs.size > 0) {
          const subId = [...subs.keys()][below(subs.size)]!;
          subs.delete(subId);
          peer.send({ msg: 'unsub', id: subId });
          await peer.next((m) => m.msg === 'nosub' && m.id === subId);
        } else if (roll < 0.6) {
          user = USERS[below(USERS.length)]!;
          await peer.call(`c${counter++}`, 'login', [user]);
        } else if (roll < 0.9) {
          const change = next() < 0.2 ? { owner: USERS[below(USERS.length)] } : next() < 0.2 ? { group: below(2) } : { [FIELDS[below(FIELDS.length)]!]: below(100) };
          await peer.call(`c${counter++}`, 'set', [id, change]);
        } else {
          await peer.call(`c${counter++}`, 'unset', [id, FIELDS[below(FIELDS.length)]]);
        }
        await peer.barrier();
        for (; applied < peer.received.length; applied++) apply(client, peer.received[applied]!, `seed ${seed}, step ${step}`);
        assert.deepEqual(client, await expected(), `seed ${seed}, step ${step}`);
      }
      peer.close();
    });
  }
});

/** Applies one message as a strict client: no added for a document it holds, no change or removal of one it does not. */
function apply(client: Map<string, Fields>, m: Message, where: string): void {
  if (m.collection !== 'items') return;
  const id = m.id as string;
  const doc = client.get(id);
  if (m.msg === 'added') {
    assert.ok(!doc, `${where}: added for a document the client has: ${JSON.stringify(m)}`);
    client.set(id, { ...(m.fields as Fields) });
  } else if (m.msg === 'changed') {
    assert.ok(doc, `${where}: changed for a document the client does not have: ${JSON.stringify(m)}`);
    assert.ok(m.fields || m.cleared, `${where}: an empty changed`);
    Object.assign(doc, m.fields);
    for (const name of (m.cleared as string[] | undefined) ?? []) delete doc[name];
  } else if (m.msg === 'removed') {
    assert.ok(client.delete(id), `${where}: removed a document the client does not have: ${id}`);
  }
}
