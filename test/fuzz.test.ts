/**
 * A short slice of the fuzz program (scripts/fuzz.ts): every kind of frame
 * over every transport to a real server process, which must stay up, answer
 * /health and a DDP round trip throughout, keep its memory bounded, and
 * answer the hostile frames with the errors they deserve. The long run (a
 * million frames) is recorded in BENCHMARKS.md.
 */
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { describe, it } from 'node:test';
import { TRANSPORTS } from '../scripts/fuzz/connections.js';
import { runFuzz } from '../scripts/fuzz/run.js';

describe('the fuzz program', () => {
  it('sends every kind of frame over every transport; the server stays up, answers throughout and stays bounded', async () => {
    const report = await runFuzz({ frames: 20000, seconds: 5, connections: 6, seed: 'suite', maxRssMiB: 512, probeMs: 200 });
    assert.deepEqual(report.failures, [], `${JSON.stringify(report.probes)}\n${report.serverLog.join('\n')}`);
    for (const transport of TRANSPORTS) {
      for (const kind of ['valid', 'mutated', 'nested', 'partial', 'binary', 'garbage']) {
        assert.ok((report.sent[`${transport} ${kind}`] ?? 0) > 0, `${kind} frames went over ${transport}`);
      }
    }
    const replies = (name: string) => report.replies[name] ?? 0;
    assert.ok(replies('result') > 0 && replies('updated') > 0, 'valid calls were answered');
    assert.ok(replies('error: Message nested too deeply (more than 128 levels)') > 0, 'nested messages were refused');
    assert.ok(replies('error: Binary frames are not DDP: send each message as a text frame') > 0, 'binary frames were refused');
    assert.ok(replies('error: Bad request') > 0, 'garbage was refused');
    assert.ok(report.probes.health.ok >= 5 && report.probes.ddp.ok >= 5, `probed throughout: ${JSON.stringify(report.probes)}`);
    assert.ok(report.rss.maxMiB > 0, 'the server memory was sampled');
  });

  it('has --help, and refuses a bad option with one line', () => {
    const help = spawnSync(process.execPath, ['dist/scripts/fuzz.js', '--help'], { encoding: 'utf8' });
    assert.equal(help.status, 0);
    assert.match(help.stdout, /^Fuzz a Perseid server/);
    assert.match(help.stdout, /--frames <n>/);
    const bad = spawnSync(process.execPath, ['dist/scripts/fuzz.js', '--frames', 'many'], { encoding: 'utf8' });
    assert.equal(bad.status, 2);
    assert.match(bad.stderr, /^fuzz: --frames must be a positive integer \(got many\)\n/);
  });
});
