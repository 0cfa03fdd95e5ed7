/**
 * The embedded store finds damage instead of serving it: every log record and
 * snapshot line carries a checksum; a damaged record (anywhere, the last
 * complete one included) makes opening refuse with one line naming the place,
 * while only an incomplete last line (an interrupted append, never
 * acknowledged) is cut off by itself; directories written before checksums
 * still open; and `perseid store repair` keeps every intact record and sets
 * the damaged ones aside.
 */
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { describe, it } from 'node:test';
import { crc32 } from 'node:zlib';
import { DuplicateKeyError } from '../src/data/driver.js';
import { listDataFiles, logFileName } from '../src/data/embedded/files.js';
import { repairStore } from '../src/data/embedded/repair.js';
import { openEmbeddedStore } from '../src/data/embedded/store.js';
import { StoreDamagedError } from '../src/data/embedded/store-errors.js';
import { EJSON } from '../src/ddp/ejson.js';
import { ObjectID } from '../src/ddp/object-id.js';
import { docsOf, fixtureCopy, logLines, open, tempDir } from './embedded-helpers.js';
import { CLI } from './processes.js';

/** A store with three documents written in three records (seqs 1-3) and an update (seq 4). */
async function threeDocs(): Promise<{ dir: string; log: string }> {
  const dir = tempDir();
  const store = await open(dir);
  for (const id of ['a', 'b', 'c']) await store.collection('c').insert({ _id: id, n: 1 });
  await store.collection('c').update({ _id: 'b' }, { $set: { n: 2 } }, {});
  await store.close();
  return { dir, log: path.join(dir, logFileName(1)) };
}

/** Rewrites line `index` (0-based) of `file` with `edit`, keeping its old checksum: a silent change on disk. */
function tamper(file: string, index: number, edit: (line: string) => string): void {
  const lines = fs.readFileSync(file, 'utf8').split('\n');
  const changed = edit(lines[index]!);
  assert.notEqual(changed, lines[index], 'the edit changed the line');
  lines[index] = changed;
  fs.writeFileSync(file, lines.join('\n'));
}

async function refusal(dir: string): Promise<string> {
  let message = '';
  await assert.rejects(openEmbeddedStore({ dir }), (error: unknown) => {
    assert.ok(error instanceof StoreDamagedError, String(error));
    message = error.message;
    return true;
  });
  assert.ok(!message.includes('\n'), 'one line');
  assert.match(message, new RegExp(`Run \`perseid store repair --data-dir ${dir}\``));
  return message;
}

describe('embedded store: checksums', () => {
  it('puts a checksum on every log record and every snapshot line', async () => {
    const dir = tempDir();
    const store = await open(dir);
    const c = store.collection('c');
    await c.createIndex({ n: 1 });
    for (let i = 0; i < 5; i++) await c.insert({ _id: `d${i}`, n: i, at: new Date(i), text: 'é ✓ \u2028' });
    await store.compact();
    await c.remove({ _id: 'd0' });
    await store.close();
    const files = listDataFiles(dir);
    const lines = [...files.snapshots, ...files.logs].flatMap(({ path: file }) => fs.readFileSync(file, 'utf8').split('\n').slice(0, -1));
    assert.ok(lines.length >= 9, `${lines.length} lines`);
    for (const line of lines) {
      const [, sum, json] = /^([0-9a-f]{8}) (\{.*\})$/s.exec(line) ?? [];
      assert.ok(sum && json, line);
      assert.equal(sum, crc32(json).toString(16).padStart(8, '0'), line);
    }
  });

  it('opens a data directory written before checksums, and goes on with checksummed records', async () => {
    // test/fixtures/legacy-store: a snapshot (version 1) and a log written by the code before checksums.
    const dir = fixtureCopy('legacy-store');
    const expectTasks = [
      { _id: 't1', text: 'task 1', owner: 'ann', at: new Date(1700000000001), done: true },
      { _id: 't2', text: 'task 2', owner: 'bob', at: new Date(1700000000002), tags: ['a', 'b'], nested: { n: 1.5 } },
      { _id: 't3', text: 'task 3', owner: 'ann', at: new Date(1700000000003) },
      { _id: 't4', text: 'task 4', owner: 'bob', at: new Date(1700000000004) },
      { _id: 't5', text: 'after the snapshot', owner: 'ann', at: new Date(1700000000005) },
    ];
    let store = await open(dir);
    assert.ok(EJSON.equals(await docsOf(store, 'tasks'), expectTasks), EJSON.stringify(await docsOf(store, 'tasks')));
    const users = await docsOf(store, 'users');
    assert.ok(EJSON.equals(users, [
      { _id: new ObjectID('0123456789abcdef01234567'), email: 'ann@example.com', bin: new Uint8Array([1, 2, 255]) },
      { _id: 'u2', email: 'bob@example.com' },
    ]));
    await assert.rejects(store.collection('users').insert({ _id: 'u3', email: 'bob@example.com' }), DuplicateKeyError, 'the unique index came back');
    assert.equal(store.stats().lastSeq, 13);
    await store.collection('tasks').insert({ _id: 't6', text: 'with a checksum' });
    await store.close();

    const log = listDataFiles(dir).logs.at(-1)!.path;
    const lines = fs.readFileSync(log, 'utf8').split('\n').slice(0, -1);
    assert.match(lines[0]!, /^\{"seq":10,/, 'the old records stay as they were');
    assert.match(lines.at(-1)!, /^[0-9a-f]{8} \{"seq":14,/, 'new records carry checksums');
    store = await open(dir);
    assert.deepEqual((await docsOf(store, 'tasks')).map((d) => d._id), ['t1', 't2', 't3', 't4', 't5', 't6']);
    await store.compact();
    await store.close();
    store = await open(dir);
    assert.equal((await docsOf(store, 'tasks')).length, 6, 'and its snapshot is the new format');
  });

  it('refuses a record changed on disk, wherever it is, naming the place; a last one may have been acknowledged', async () => {
    const cases: Array<[number, RegExp]> = [
      [0, /wal-00000001\.log line 1: checksum mismatch/],
      [2, /wal-00000001\.log line 3: checksum mismatch/],
      [3, /wal-00000001\.log line 4 \(its last line, but complete, so it may have been acknowledged\): checksum mismatch/],
    ];
    for (const [index, expected] of cases) {
      const { dir, log } = await threeDocs();
      tamper(log, index, (line) => line.replace(/"n":\d/, '"n":7')); // still valid JSON: only the checksum can tell
      assert.match(await refusal(dir), expected);
      assert.match(await refusal(dir), expected, 'a refused open releases the lock');
    }
  });

  it('refuses a bare line after checksummed ones, and garbage', async () => {
    for (const edit of [(line: string) => line.slice(9), (line: string) => line.slice(0, 12) + '\u0000' + line.slice(13)]) {
      const { dir, log } = await threeDocs();
      tamper(log, 1, edit);
      assert.match(await refusal(dir), /line 2: (no checksum|checksum mismatch)/);
    }
  });

  it('cuts off an incomplete last line (an append a crash cut short, never acknowledged) with a warning', async () => {
    for (const tail of ['0badc0de {"seq":5,"op":"put","collection":"c","doc":{"_id":"to', '{"seq":5,"op":"pu']) {
      const { dir, log } = await threeDocs();
      const size = fs.statSync(log).size;
      fs.appendFileSync(log, tail);
      logLines.length = 0;
      let store = await open(dir);
      assert.deepEqual((await docsOf(store)).map((d) => [d._id, d.n]), [['a', 1], ['b', 2], ['c', 1]]);
      assert.equal(fs.statSync(log).size, size);
      assert.ok(logLines.some((line) => line.includes('torn last line') && line.includes('never acknowledged') && line.includes('line=5')), logLines.join('\n'));
      await store.collection('c').insert({ _id: 'd' });
      await store.close();
      store = await open(dir);
      assert.deepEqual((await docsOf(store)).map((d) => d._id), ['a', 'b', 'c', 'd']);
    }
  });

  it('applies a write whole or not at all: cuts off the records of a last write that a crash cut short', async () => {
    for (const cut of ['after a line', 'inside a line']) {
      const dir = tempDir();
      let store = await open(dir);
      const c = store.collection('c');
      for (let i = 0; i < 5; i++) await c.insert({ _id: `d${i}`, n: 0 });
      const log = listDataFiles(dir).logs[0]!.path;
      const before = fs.statSync(log).size;
      await c.update({}, { $set: { n: 1 } }, { multi: true });
      await store.close();
      // A kill -9 during the batch's write() leaves a prefix of it: its first three records, and part of the fourth.
      const batch = fs.readFileSync(log).subarray(before).toString('utf8').split('\n');
      fs.truncateSync(log, before);
      fs.appendFileSync(log, batch.slice(0, 3).join('\n') + '\n' + (cut === 'inside a line' ? batch[3]!.slice(0, 20) : ''));
      logLines.length = 0;
      store = await open(dir);
      assert.deepEqual((await docsOf(store)).map((d) => d.n), [0, 0, 0, 0, 0], `none of the unacknowledged update is applied (${cut})`);
      assert.equal(fs.statSync(log).size, before);
      assert.ok(logLines.some((line) => line.includes('a write a crash cut short') && line.includes('line=6')), logLines.join('\n'));
      await store.collection('c').insert({ _id: 'after' });
      await store.close();
      store = await open(dir);
      assert.equal((await docsOf(store)).length, 6);
      await store.close();
    }
  });

  it('refuses a complete but unreadable last line: it is damage, not an interrupted append', async () => {
    const { dir, log } = await threeDocs();
    fs.appendFileSync(log, '{"seq":5,"op":"pu\n');
    assert.match(await refusal(dir), /line 5 \(its last line, but complete, so it may have been acknowledged\): no checksum/);
  });

  it('refuses when records are missing', async () => {
    const { dir, log } = await threeDocs();
    const lines = fs.readFileSync(log, 'utf8').split('\n');
    lines.splice(1, 1);
    fs.writeFileSync(log, lines.join('\n'));
    assert.match(await refusal(dir), /line 2: seq 3 where 2 was expected: record 2 is missing/);
  });

  it('refuses a damaged snapshot that no log covers, naming it', async () => {
    const dir = tempDir();
    const store = await open(dir);
    for (const id of ['a', 'b', 'c']) await store.collection('c').insert({ _id: id, n: 1 });
    await store.compact();
    await store.collection('c').insert({ _id: 'd', n: 1 });
    await store.close();
    const snapshot = listDataFiles(dir).snapshots[0]!.path;
    tamper(snapshot, 2, (line) => line.replace('"n":1', '"n":9'));
    assert.match(await refusal(dir), /records 1 to 3 are missing, and snapshot-0+3\.snap, which held them, is unreadable \(is invalid at line 3: checksum mismatch\)/);
    fs.rmSync(listDataFiles(dir).logs[0]!.path);
    assert.match(await refusal(dir), /snapshot-0+3\.snap is unreadable \(is invalid at line 3: checksum mismatch\) and the logs reach only seq 0/);
  });
});

describe('embedded store: repair', () => {
  it('keeps every intact record, sets the damaged ones aside in a file, and opens again', async () => {
    const { dir, log } = await threeDocs();
    tamper(log, 3, (line) => line.replace('"n":2', '"n":3')); // the update of b, the last line
    tamper(log, 0, (line) => line.replace('"n":1', '"n":4')); // the insert of a
    const original = fs.readFileSync(log, 'utf8');
    const report = await repairStore(dir);
    assert.equal(report.healthy, false);
    assert.deepEqual(
      report.damaged.map((d) => [path.basename(d.file), d.line, d.reason]),
      [
        ['wal-00000001.log', 1, 'checksum mismatch'],
        ['wal-00000001.log', 4, 'checksum mismatch'],
      ],
    );
    assert.deepEqual(report.files, [{ file: log, records: 2 }]);
    assert.equal(report.documents, 2);
    const aside = fs.readFileSync(path.join(report.setAside!, 'damaged.log'), 'utf8').split('\n');
    assert.equal(aside[0], '# wal-00000001.log line 1: checksum mismatch');
    assert.match(aside[1]!, /"_id":"a","n":4/);
    assert.equal(aside[2], '# wal-00000001.log line 4: checksum mismatch');
    assert.equal(fs.readFileSync(path.join(report.setAside!, 'wal-00000001.log'), 'utf8'), original, 'the original is kept');

    const store = await open(dir);
    assert.deepEqual(await docsOf(store), [
      { _id: 'b', n: 1 },
      { _id: 'c', n: 1 },
    ], 'b as it was before its damaged update; a gone with its damaged insert');
    assert.equal(store.stats().lastSeq, 3);
    await store.collection('c').insert({ _id: 'e' });
    await store.close();
    const again = await open(dir);
    assert.deepEqual((await docsOf(again)).map((d) => d._id), ['b', 'c', 'e']);
    assert.deepEqual(listDataFiles(dir).logs.map((l) => l.generation), [2], 'the old log is gone from the directory');
  });

  it('sets aside records a damaged one makes invalid (a unique key it had freed), and keeps the intact part of a snapshot', async () => {
    const dir = tempDir();
    const store = await open(dir);
    const users = store.collection('users');
    await users.createIndex({ email: 1 }, { unique: true });
    for (let i = 0; i < 4; i++) await users.insert({ _id: `u${i}`, email: `${i}@x` });
    await store.compact();
    await users.update({ _id: 'u0' }, { $set: { email: 'new@x' } }, {});
    await users.insert({ _id: 'u9', email: '0@x' });
    await store.close();
    const files = listDataFiles(dir);
    tamper(files.logs.at(-1)!.path, 0, (line) => line.replace('new@x', 'nEw@x'));
    tamper(files.snapshots[0]!.path, 3, (line) => line.replace('"1@x"', '"L@x"'));
    const report = await repairStore(dir);
    assert.deepEqual(
      report.damaged.map((d) => d.reason.replace(/dup key: .*/, 'dup key')),
      ['checksum mismatch', 'checksum mismatch', 'cannot be applied: E11000 duplicate key error collection: users index: email_1 dup key'],
    );
    const reopened = await open(dir);
    assert.deepEqual((await docsOf(reopened, 'users')).map((d) => d.email), ['0@x', '2@x', '3@x']);
    await assert.rejects(reopened.collection('users').insert({ _id: 'x', email: '2@x' }), DuplicateKeyError);
  });

  it('changes nothing on a healthy store, or with a dry run', async () => {
    const { dir, log } = await threeDocs();
    const healthy = await repairStore(dir);
    assert.equal(healthy.healthy, true);
    assert.equal(healthy.documents, 3);
    tamper(log, 1, (line) => line.replace('"n":1', '"n":5'));
    const before = fs.readdirSync(dir).sort();
    const dry = await repairStore(dir, { dryRun: true });
    assert.equal(dry.healthy, false);
    assert.equal(dry.damaged.length, 1);
    assert.equal(dry.setAside, undefined);
    assert.deepEqual(fs.readdirSync(dir).sort(), before);
    await refusal(dir);
  });

  it('works from the command line: one-line refusal, --help, what it did, and no repair under a running store', async () => {
    const { dir, log } = await threeDocs();
    tamper(log, 2, (line) => line.replace('"n":1', '"n":6'));
    const app = 'dist/examples/tasks/app.js';
    const start = spawnSync(process.execPath, [CLI, 'start', app, '--data-dir', dir, '--port', '0'], { encoding: 'utf8', timeout: 20000 });
    assert.equal(start.status, 1, start.stderr);
    assert.match(start.stderr, /^perseid start: the embedded store at .* is damaged: wal-00000001\.log line 3: checksum mismatch\. Run `perseid store repair --data-dir .*`/);
    assert.equal(start.stderr.trim().split('\n').length, 1, start.stderr);

    const help = spawnSync(process.execPath, [CLI, 'store', 'repair', '--help'], { encoding: 'utf8' });
    assert.equal(help.status, 0);
    assert.match(help.stdout, /Usage: perseid store repair \[--data-dir <dir>\] \[--dry-run\]/);
    assert.match(help.stdout, /damaged\.log/);
    const bad = spawnSync(process.execPath, [CLI, 'store', 'mend'], { encoding: 'utf8' });
    assert.equal(bad.status, 2);
    assert.match(bad.stderr, /unknown action 'mend'/);
    // The log file given for its directory: one line, not ENOTDIR's stack trace.
    const file = spawnSync(process.execPath, [CLI, 'store', 'repair', '--data-dir', log], { encoding: 'utf8', timeout: 20000 });
    assert.equal(file.status, 1);
    assert.equal(file.stderr, `perseid store: ${log} is a file, not a data directory: give the store's directory with --data-dir\n`);
    // A directory it cannot write in (as an operator who is not the server's user would meet); /proc takes no files, whoever asks.
    const unwritable = spawnSync(process.execPath, [CLI, 'store', 'repair', '--data-dir', '/proc', '--dry-run'], { encoding: 'utf8', timeout: 20000 });
    assert.equal(unwritable.status, 1);
    assert.match(unwritable.stderr, /^perseid store: cannot write in \/proc \(E[A-Z]+\): repair takes its lock and rewrites it; run it as the user the server runs as, on a read-write mount\n$/);

    const repaired = spawnSync(process.execPath, [CLI, 'store', 'repair', '--data-dir', dir], { encoding: 'utf8', timeout: 20000 });
    assert.equal(repaired.status, 0, repaired.stderr);
    assert.match(repaired.stdout, /wal-00000001\.log: 3 intact records/);
    assert.match(repaired.stdout, /damaged: wal-00000001\.log line 3: checksum mismatch/);
    assert.match(repaired.stdout, /Kept 1 collection, 2 documents, up to seq 4\./);
    assert.match(repaired.stdout, /Set 1 damaged record aside in .*repair-\d{8}-\d{6}\/damaged\.log/);

    const running = await open(dir);
    const refused = spawnSync(process.execPath, [CLI, 'store', 'repair', '--data-dir', dir], { encoding: 'utf8', timeout: 20000 });
    assert.equal(refused.status, 1);
    assert.match(refused.stderr, /^perseid store: the data directory .* is in use by another process \(pid \d+ on .*\): stop it/);
    await running.close();
  });
});
