/**
 * The merge box against a model: holders tell a collection view of documents
 * in any order, and after every step the client's copy (the view's messages
 * applied in turn) must be the union by precedence of what each holder told,
 * with `added` and `removed` exactly when the first holder comes and the last
 * goes. Holders here keep their own documents, as the low-level publication
 * API's do; cursors sharing a live query are covered over the wire
 * (protocol.test.ts).
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { EncodedMessage } from '../src/ddp/encoded.js';
import type { Fields } from '../src/reactive/doc-change.js';
import { MergeBox, type CollectionView, type Holder } from '../src/server/merge-box.js';
import { seededRandom as random } from './helpers.js';

class TestHolder implements Holder {
  alone = false;
  readonly docs = new Map<string, Fields>();
  readonly view: CollectionView;
  constructor(box: MergeBox) {
    this.view = box.register('things', this);
  }
  get source(): TestHolder {
    return this;
  }
  fields(key: string): Fields | undefined {
    return this.docs.get(key);
  }
  forEach(callback: (key: string, fields: Fields) => void): void {
    for (const [key, fields] of this.docs) callback(key, fields);
  }
  set(key: string, fields: Fields): void {
    const before = this.docs.get(key);
    this.docs.set(key, fields);
    if (before) this.view.changed(this, key, before, fields);
    else this.view.added(this, key, fields);
  }
  delete(key: string): void {
    const before = this.docs.get(key);
    if (!before) return;
    this.docs.delete(key);
    this.view.removed(this, key, before);
  }
}

/** A live query's stand-in: one set of documents several holders publish, changed first and then told to each in turn. */
class SharedSource {
  readonly docs = new Map<string, Fields>();
  members: Member[] = [];
  fields(key: string): Fields | undefined {
    return this.docs.get(key);
  }
  set(key: string, fields: Fields): void {
    const before = this.docs.get(key);
    this.docs.set(key, fields);
    for (const member of this.members) {
      if (before) member.view.changed(member, key, before, fields);
      else member.view.added(member, key, fields);
    }
  }
  delete(key: string): void {
    const before = this.docs.get(key);
    if (!before) return;
    this.docs.delete(key);
    for (const member of this.members) member.view.removed(member, key, before);
  }
}

class Member implements Holder {
  alone = false;
  readonly view: CollectionView;
  constructor(
    box: MergeBox,
    readonly source: SharedSource,
    readonly rank: number,
  ) {
    this.view = box.register('things', this);
    // Attaching replays the source's documents to the newcomer, as a live query does.
    for (const [key, fields] of source.docs) this.view.added(this, key, fields);
    source.members.push(this);
  }
  forEach(callback: (key: string, fields: Fields) => void): void {
    for (const [key, fields] of this.source.docs) callback(key, fields);
  }
  leave(box: MergeBox): void {
    this.source.members = this.source.members.filter((m) => m !== this);
    for (const [key, fields] of this.source.docs) this.view.removed(this, key, fields);
    box.unregister(this.view, this);
  }
}

/** What a DDP client holds after applying the messages. */
class ClientCopy {
  readonly docs = new Map<string, Fields>();
  readonly messages: Array<Record<string, unknown>> = [];
  sendEncoded(message: EncodedMessage): void {
    const m = JSON.parse(message.text) as { msg: string; id: string; fields?: Fields; cleared?: string[] };
    this.messages.push(m);
    if (m.msg === 'added') {
      assert.ok(!this.docs.has(m.id), `added twice: ${m.id}`);
      this.docs.set(m.id, { ...m.fields });
    } else if (m.msg === 'changed') {
      const doc = this.docs.get(m.id);
      assert.ok(doc, `changed before added: ${m.id}`);
      Object.assign(doc, m.fields);
      for (const name of m.cleared ?? []) delete doc[name];
    } else {
      assert.ok(this.docs.delete(m.id), `removed unknown: ${m.id}`);
    }
  }
}

/** The union by precedence (earliest registered first) of what live holders publish. */
function expected(holders: TestHolder[]): Map<string, Fields> {
  const out = new Map<string, Fields>();
  for (const holder of holders) {
    for (const [key, fields] of holder.docs) {
      const doc = out.get(key) ?? {};
      for (const name in fields) if (!(name in doc)) doc[name] = fields[name];
      out.set(key, doc);
    }
  }
  return out;
}

describe('the merge box', () => {
  it('unites fields by precedence whatever order holders tell it in, and hands a field on when its holder leaves', () => {
    const client = new ClientCopy();
    const box = new MergeBox(client, () => 'SERVER_MERGE');
    const [a, b, c] = [new TestHolder(box), new TestHolder(box), new TestHolder(box)];
    c!.set('d', { y: 3, z: 3 });
    b!.set('d', { x: 2, y: 2 });
    a!.set('d', { x: 1 });
    assert.deepEqual(client.docs.get('d'), { x: 1, y: 2, z: 3 });
    b!.set('d', { x: 9, y: 2 });
    assert.equal(client.messages.length, 3, 'a change to a field an earlier holder wins sends nothing');
    a!.delete('d');
    assert.deepEqual(client.docs.get('d'), { x: 9, y: 2, z: 3 });
    b!.delete('d');
    assert.deepEqual(client.docs.get('d'), { y: 3, z: 3 });
    c!.delete('d');
    assert.equal(client.docs.size, 0);
    assert.deepEqual(
      client.messages.map((m) => m.msg),
      ['added', 'changed', 'changed', 'changed', 'changed', 'removed'],
    );
  });

  it('ignores what a holder tells after it has left (a subscription stopped while its query was loading)', () => {
    const client = new ClientCopy();
    const box = new MergeBox(client, () => 'SERVER_MERGE');
    const [a, b, c] = [new TestHolder(box), new TestHolder(box), new TestHolder(box)];
    a.set('d', { x: 1 });
    box.unregister(c.view, c);
    c.set('late', { x: 2 });
    b.set('d', { y: 2 });
    assert.deepEqual([...client.docs.keys()], ['d']);
    assert.deepEqual(client.docs.get('d'), { x: 1, y: 2 });
  });

  it('matches the model when many holders share sources that change before they tell each holder', () => {
    for (const seed of [11, 12, 13]) {
      const next = random(seed);
      const pick = <T>(items: T[]): T => items[Math.floor(next() * items.length)]!;
      const client = new ClientCopy();
      const box = new MergeBox(client, () => 'SERVER_MERGE');
      const sources = [new SharedSource(), new SharedSource(), new SharedSource()];
      let members: Member[] = [];
      let rank = 0;
      // While two or more holders merge, a source ranks by its first holder among them (in the order they came).
      let ranks: Map<SharedSource, number> | undefined;
      const expectedNow = () => {
        const live = sources.filter((source) => source.members.length > 0).sort((a, b) => (ranks?.get(a) ?? 0) - (ranks?.get(b) ?? 0));
        const out = new Map<string, Fields>();
        for (const source of live) {
          for (const [key, fields] of source.docs) {
            const doc = out.get(key) ?? {};
            for (const name in fields) if (!(name in doc)) doc[name] = fields[name];
            out.set(key, doc);
          }
        }
        return out;
      };
      for (let step = 0; step < 4000; step++) {
        const roll = next();
        if (roll < 0.1 && members.length < 40) {
          const source = pick(sources);
          members.push(new Member(box, source, rank++));
          if (members.length === 2) ranks = new Map();
          for (const member of members) if (ranks && !ranks.has(member.source)) ranks.set(member.source, member.rank);
        } else if (roll < 0.18 && members.length > 0) {
          const leaving = pick(members);
          leaving.leave(box);
          members = members.filter((m) => m !== leaving);
          if (members.length < 2) ranks = undefined;
        } else {
          const source = pick(sources);
          const key = pick(['a', 'b', 'c']);
          if (roll < 0.35) source.delete(key);
          else {
            const fields: Fields = {};
            for (const name of ['x', 'y', 'z']) if (next() < 0.6) fields[name] = Math.floor(next() * 3);
            source.set(key, fields);
          }
        }
        assert.deepEqual(client.docs, expectedNow(), `seed ${seed}, step ${step}`);
      }
    }
  });

  it('matches the model over 20,000 random steps of holders coming, going, adding, changing and removing', () => {
    for (const seed of [1, 2, 3, 4]) {
      const next = random(seed);
      const pick = <T>(items: T[]): T => items[Math.floor(next() * items.length)]!;
      const client = new ClientCopy();
      const box = new MergeBox(client, () => 'SERVER_MERGE');
      let holders: TestHolder[] = [new TestHolder(box)];
      for (let step = 0; step < 5000; step++) {
        const roll = next();
        if (roll < 0.05 && holders.length < 6) holders.push(new TestHolder(box));
        else if (roll < 0.1 && holders.length > 1) {
          const leaving = pick(holders);
          for (const key of [...leaving.docs.keys()]) leaving.delete(key);
          box.unregister(leaving.view, leaving);
          holders = holders.filter((h) => h !== leaving);
        } else {
          const holder = pick(holders);
          const key = pick(['a', 'b', 'c', 'd']);
          if (roll < 0.3) holder.delete(key);
          else {
            const fields: Fields = {};
            for (const name of ['x', 'y', 'z']) if (next() < 0.6) fields[name] = Math.floor(next() * 3);
            holder.set(key, fields);
          }
        }
        assert.deepEqual(client.docs, expected(holders), `seed ${seed}, step ${step}`);
      }
    }
  });
});
