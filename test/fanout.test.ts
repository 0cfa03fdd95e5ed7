/**
 * The fan-out feeder on the in-process bus: a server's own writes are applied
 * once (their echo is dropped), other servers apply them, relayed changes reach
 * everyone, and malformed messages on a channel are ignored with a warning.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { MemoryBus } from '../src/fanout/bus-memory.js';
import { createLogger, setLogSink } from '../src/log.js';
import { ChangeHub } from '../src/data/mongo/change-hub.js';
import { FanoutFeeder } from '../src/data/mongo/fanout-feeder.js';
import type { ChangeEvent } from '../src/data/change-source.js';

const log = createLogger('fanout-test');

function server(bus: MemoryBus, id: string): { hub: ChangeHub; feeder: FanoutFeeder; seen: ChangeEvent[] } {
  const hub = new ChangeHub(id, { maxWaitMs: 1000, log });
  const feeder = new FanoutFeeder(hub, bus, 'app', id, log);
  const seen: ChangeEvent[] = [];
  hub.watch('items', (event) => seen.push(event));
  return { hub, feeder, seen };
}

/** The memory bus delivers in a microtask: once the event loop turns, everything published so far has arrived. */
const settle = () => new Promise((resolve) => setImmediate(resolve));

describe('fan-out feeder (in-process bus)', () => {
  it('applies a server\'s own write once, and every other server\'s once', async () => {
    const bus = new MemoryBus();
    const a = server(bus, 'a');
    const b = server(bus, 'b');
    await settle();
    a.feeder.published('items', [{ op: 'insert', id: 'x1', doc: { _id: 'x1', n: 1, at: new Date(5) } }]);
    await settle();
    assert.deepEqual(a.seen.map((e) => e.op === 'resync' ? 'resync' : e.id), ['x1']);
    assert.deepEqual(b.seen.map((e) => e.op === 'resync' ? 'resync' : e.id), ['x1']);
    const received = b.seen[0]!;
    assert.ok(received.op === 'insert' && received.doc!.at instanceof Date, 'EJSON types survive the wire');
  });

  it('delivers relayed changes to every server, the relay included', async () => {
    const bus = new MemoryBus();
    const a = server(bus, 'a');
    const b = server(bus, 'b');
    await settle();
    a.feeder.relayed('items', { op: 'remove', id: 'x2' });
    await settle();
    assert.equal(a.seen.length, 1);
    assert.equal(b.seen.length, 1);
  });

  it('ignores messages it cannot read, and keeps working', async () => {
    const bus = new MemoryBus();
    const a = server(bus, 'a');
    const b = server(bus, 'b');
    await settle();
    const warnings: string[] = [];
    setLogSink((line) => warnings.push(line));
    try {
      for (const junk of ['not json', '{"s":"z","c":"items","o":"?"}', 'null', '{"c":5}']) bus.publish(b.feeder.channel('items'), junk);
      a.feeder.published('items', [{ op: 'update', id: 'x3', doc: { _id: 'x3', n: 2 }, modifier: { $set: { n: 2 } } }]);
      await settle();
    } finally {
      setLogSink((line) => process.stderr.write(line + '\n'));
    }
    assert.deepEqual(b.seen.map((e) => e.op), ['update']);
    // Both servers follow the channel: each says so once per bad message.
    assert.equal(warnings.filter((w) => /(unreadable|malformed) fan-out message; ignored/.test(w)).length, 8, warnings.join('\n'));
  });
});
