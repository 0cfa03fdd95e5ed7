/**
 * The resume log keeps a tail of what a connected session sent, trimmed a
 * chunk (or a socket's batch) at a time: at least the tail asked for stays
 * (when that much was sent), no more than two chunks beyond it, and what a
 * resuming client missed comes back in order, across chunks, without the
 * messages that are not counted (heartbeats).
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { EncodedMessage } from '../src/ddp/encoded.js';
import { ResumeLog } from '../src/server/resume-log.js';

const message = (n: number, size = 100) => new EncodedMessage(String(n).padEnd(size, ' '));
const numbers = (messages: EncodedMessage[] | undefined) => messages?.map((m) => Number(m.text.trim()));

describe('resume log', () => {
  it('keeps at least the tail asked for, and at most two chunks more', () => {
    const log = new ResumeLog(1000, 4096);
    for (let n = 0; n < 5000; n++) {
      log.record(message(n));
      const keptFrom = [...Array(n + 1).keys()].findIndex((start) => log.missedSince(start) !== undefined);
      const kept = n + 1 - keptFrom;
      assert.ok(kept >= Math.min(n + 1, 41), `after ${n + 1} messages only ${kept} kept`);
      assert.ok(kept * 100 <= 4096 + 2048 + 100, `after ${n + 1} messages ${kept} kept`);
      if (n > 4900) assert.deepEqual(numbers(log.missedSince(n - 39)), [...Array(40).keys()].map((i) => n - 39 + i));
    }
  });

  it('bounds the tail by messages too', () => {
    const log = new ResumeLog(10, 1 << 20);
    for (let n = 0; n < 1000; n++) log.record(message(n, 2));
    assert.deepEqual(numbers(log.missedSince(990)), [...Array(10).keys()].map((i) => 990 + i));
    // At most two chunks (64 messages each) beyond the 10 asked for.
    assert.equal(log.missedSince(1000 - 10 - 128), undefined);
    assert.deepEqual(log.missedSince(1000), []);
    assert.equal(log.missedSince(1001), undefined);
    assert.equal(log.missedSince(995.5), undefined);
  });

  it('keeps everything while the client is away, and trims again when it is back', () => {
    const log = new ResumeLog(1000, 1024);
    for (let n = 0; n < 100; n++) log.record(message(n));
    log.hold();
    for (let n = 100; n < 600; n++) log.record(message(n));
    assert.equal(log.heldCount, 500);
    assert.equal(log.heldBytes, 50_000);
    assert.deepEqual(numbers(log.missedSince(100)), [...Array(500).keys()].map((i) => 100 + i));
    log.release(600);
    assert.equal(log.missedSince(100), undefined);
    assert.deepEqual(numbers(log.missedSince(590)), [...Array(10).keys()].map((i) => 590 + i));
  });

  it('remembers the answers among the kept messages only', () => {
    const log = new ResumeLog(1000, 1024);
    log.answers('m:1', 0);
    log.record(message(0));
    log.answers('s:2', 1);
    log.record(message(1));
    assert.ok(log.mentions('m:1') && log.mentions('s:2'));
    assert.ok(!log.mentions('m:2'));
    for (let n = 2; n < 200; n++) log.record(message(n));
    assert.ok(!log.mentions('m:1') && !log.mentions('s:2'));
  });

  it('takes batches as they are, counting and resending only the counted messages', () => {
    const log = new ResumeLog(1000, 4096);
    const ping = () => Object.assign(new EncodedMessage('{"msg":"ping"}'), { uncounted: true });
    let n = 0;
    for (let batch = 0; batch < 1000; batch++) {
      const messages = [ping()];
      for (let i = 0; i < batch % 7; i++) messages.push(message(n++));
      log.recordBatch(messages, messages.reduce((sum, m) => sum + m.text.length, 0));
      assert.equal(log.count, n);
      // Checked after every batch: the dropped chunks are compacted away now and then, the tail must not move.
      if (n >= 30) assert.deepEqual(numbers(log.missedSince(n - 30)), [...Array(30).keys()].map((i) => n - 30 + i));
    }
    assert.deepEqual(numbers(log.missedSince(n - 30)), [...Array(30).keys()].map((i) => n - 30 + i));
    assert.deepEqual(log.missedSince(n), []);
    assert.equal(log.missedSince(n - 200), undefined);
  });

  it('forgets on release what the client missed, as it is sent (and so recorded) again', () => {
    const log = new ResumeLog(1000, 1024);
    for (let n = 0; n < 100; n++) log.record(message(n));
    log.hold();
    for (let n = 100; n < 150; n++) log.record(message(n));
    const missed = log.missedSince(95)!;
    assert.deepEqual(numbers(missed), [...Array(55).keys()].map((i) => 95 + i));
    log.release(95);
    assert.equal(log.count, 95);
    log.recordBatch(missed, missed.length * 100);
    log.recordBatch([message(150)], 100);
    assert.equal(log.count, 151);
    assert.deepEqual(numbers(log.missedSince(140)), [...Array(11).keys()].map((i) => 140 + i));
  });
});
