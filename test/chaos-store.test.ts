/**
 * Chaos, part 3: the embedded store's disk and files, under a real server. The
 * disk fills up under S1-like load (a small tmpfs; root only) and is freed: a
 * refused write never appears, acknowledged ones all stay, /health says why
 * it fails, and writes resume without a restart. A damaged log tail and a
 * damaged middle record: an interrupted append is cut off by itself, damage is
 * refused in one line, and `perseid store repair` brings the server back with
 * every intact record.
 */
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { describe, it } from 'node:test';
import { freePort } from '../scripts/services/process.js';
import { ChaosLoad, publishedIds, showingLogs } from './chaos-load.js';
import { CLI, eventually, exited, startPerseid, type PerseidProcess } from './processes.js';
import { smallDisk, smallDiskSkip } from './small-disk.js';

const APP = 'dist/test/fixtures/cluster-app.js';

interface Health {
  status: string;
  reason?: string;
}

async function health(server: PerseidProcess): Promise<{ code: number; body: Health }> {
  const response = await fetch(`${server.url}/health`);
  return { code: response.status, body: (await response.json()) as Health };
}

describe('chaos: the embedded store\'s disk and files', () => {
  it('a disk that fills up under load and is freed: refused writes never appear, /health tells, writes resume by themselves', { skip: smallDiskSkip }, async () => {
    const disk = smallDisk(4 << 20);
    const dataDir = path.join(disk.dir, 'data');
    const args = ['--port', String(await freePort()), '--data-dir', dataDir];
    let server = await startPerseid(APP, args);
    const load = await ChaosLoad.start([server.url]);
    try {
      await showingLogs([{ log: () => server.log() }], async () => {
        await load.progress(40, 'writes before the disk fills');
        disk.fill();
        // The log's last page may still take a few small records; then every write is refused.
        await eventually(() => load.refused.size >= 20, 'writes refused on the full disk', 15000);
        const full = await health(server);
        assert.equal(full.code, 503);
        assert.equal(full.body.status, 'failing');
        assert.match(full.body.reason ?? '', /^database: the embedded store cannot write .*ENOSPC/);
        disk.free();
        await eventually(async () => (await health(server)).code === 200, '/health to recover without a restart', 10000);
        await load.progress(40, 'writes after space returns');
        await load.stop();
        const stored = await publishedIds(server.url);
        await load.check(stored);
        const reappeared = [...load.refused].filter((id) => stored.has(id));
        assert.deepEqual(reappeared, [], 'a refused write is not stored');
        assert.ok(load.refused.size >= 20 && load.acknowledged.size >= 80, `${load.refused.size} refused, ${load.acknowledged.size} acknowledged`);

        assert.equal(await server.stop('SIGKILL'), null);
        server = await startPerseid(APP, args);
        const afterRestart = await publishedIds(server.url);
        assert.deepEqual([...load.refused].filter((id) => afterRestart.has(id)), [], 'nor after a restart');
        assert.deepEqual([...load.acknowledged].filter((id) => !afterRestart.has(id)), [], 'and every acknowledged write is there');
      });
    } finally {
      load.close();
      await server.stop();
      disk.remove();
    }
  });

  it('a damaged log tail and a damaged middle record: cut off or refused in one line, then repaired with every intact record', async () => {
    const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'perseid-chaos-damage-'));
    const args = ['--port', String(await freePort()), '--data-dir', dataDir];
    const log = path.join(dataDir, 'wal-00000001.log');
    const start = () => startPerseid(APP, args);
    const refusedStart = (): string => {
      const run = spawnSync(process.execPath, [CLI, 'start', APP, ...args], { encoding: 'utf8', timeout: 30000 });
      assert.equal(run.status, 1, run.stdout + run.stderr);
      assert.equal(run.stderr.trim().split('\n').length, 1, run.stderr);
      return run.stderr;
    };
    /** The id of the item a log line inserts. */
    const idOf = (line: string) => /"_id":"([^"]+)"/.exec(line)![1]!;
    const lines = () => fs.readFileSync(log, 'utf8').split('\n').slice(0, -1);
    const rewrite = (index: number, edit: (line: string) => string) => {
      const all = lines();
      all[index] = edit(all[index]!);
      fs.writeFileSync(log, all.join('\n') + '\n');
    };
    let server = await start();
    try {
      const load = await ChaosLoad.start([server.url], 4);
      await load.progress(60, 'writes to damage');
      await load.stop();
      load.close();
      const written = await publishedIds(server.url);
      await server.stop('SIGKILL');
      await exited(server.child);

      // An append cut short: cut off with a warning, nothing lost.
      fs.appendFileSync(log, '0badc0de {"seq":999999,"op":"put","collection":"items","doc":{"_id":"torn');
      server = await start();
      assert.match(server.log(), /cut off a torn last line of the write-ahead log/);
      assert.deepEqual(await publishedIds(server.url), written);
      await server.stop();

      // The last record, complete but changed: refused, and named as possibly acknowledged.
      const last = lines().length - 1;
      const lastId = idOf(lines()[last]!);
      rewrite(last, (line) => line.replace('"n":', '"n":1'));
      assert.match(refusedStart(), /wal-00000001\.log line \d+ \(its last line, but complete, so it may have been acknowledged\): checksum mismatch\. Run `perseid store repair --data-dir /);
      // And a record in the middle.
      const middle = Math.floor(last / 2);
      const middleId = idOf(lines()[middle]!);
      rewrite(middle, (line) => line.replace('"by":"user', '"by":"USER'));
      assert.match(refusedStart(), new RegExp(`wal-00000001\\.log line ${middle + 1}: checksum mismatch`));

      const repair = spawnSync(process.execPath, [CLI, 'store', 'repair', '--data-dir', dataDir], { encoding: 'utf8', timeout: 30000 });
      assert.equal(repair.status, 0, repair.stderr);
      assert.match(repair.stdout, /Set 2 damaged records aside in /);
      server = await start();
      const expected = new Set([...written].filter((id) => id !== lastId && id !== middleId));
      assert.deepEqual(await publishedIds(server.url), expected, 'every intact record, and only the two damaged ones missing');
    } finally {
      await server.stop();
      fs.rmSync(dataDir, { recursive: true, force: true });
    }
  });
});
