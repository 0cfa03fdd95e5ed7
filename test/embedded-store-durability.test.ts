/**
 * Every acknowledged write survives kill -9, checked one by one, on kills
 * timed to hurt: up to 50 rounds (at most 70 s, at least 15 rounds) on one
 * data directory, each killing the writer right after an acknowledgement (the writer kills itself after its Nth, or
 * the test kills it the moment it reads one), while other writes are queued
 * and compactions run. An acknowledgement sent before its record reached the
 * log is lost in the first round.
 */
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { describe, it } from 'node:test';
import { docsOf, open, tempDir } from './embedded-helpers.js';

const WRITER = new URL('./fixtures/embedded-writer.js', import.meta.url).pathname;
const ROUNDS = 50;
/** Bounded in time too: on a machine busy with other suites, fewer rounds, but never fewer than this. */
const DEADLINE_MS = 70000;
const MIN_ROUNDS = 15;

/** Runs the writer until it dies by SIGKILL; resolves with the acknowledgements it printed. */
function runUntilKilled(dir: string, round: number, mode: 'self' | 'test', count: number): Promise<string[]> {
  return new Promise((resolve, reject) => {
    const args = [WRITER, dir, String(round), ...(mode === 'self' ? [String(count)] : [])];
    const child = spawn(process.execPath, args, { stdio: ['ignore', 'pipe', 'pipe'], env: { ...process.env, PERSEID_LOG_LEVEL: 'error' } });
    let output = '';
    let errors = '';
    const timer = setTimeout(() => child.kill('SIGKILL'), 20000); // bounded whatever happens
    child.stdout.setEncoding('utf8');
    child.stdout.on('data', (chunk: string) => {
      output += chunk;
      if (mode === 'test' && output.split('\n').length > count) child.kill('SIGKILL');
    });
    child.stderr.on('data', (chunk: Buffer) => (errors += chunk.toString()));
    child.on('error', reject);
    // 'close' comes after the exit and after stdout has been read to its end.
    child.on('close', (code, signal) => {
      clearTimeout(timer);
      if (signal !== 'SIGKILL') reject(new Error(`the writer exited by itself (code ${code}): ${errors}`));
      else resolve(output.split('\n').slice(0, -1)); // the last piece is an unfinished line or empty
    });
  });
}

describe('embedded store: durability', () => {
  it(`keeps every acknowledged write through up to ${ROUNDS} kills right after an acknowledgement`, async (t) => {
    const dir = tempDir();
    const minimum = new Map<string, number>(); // acknowledged id → lowest value it may hold
    let total = 0;
    const deadline = Date.now() + DEADLINE_MS;
    let round = 1;
    for (; round <= ROUNDS && (round <= MIN_ROUNDS || Date.now() < deadline); round++) {
      // Vary the moment: 1 to 400 acknowledgements in, half by the writer itself, half from here.
      const count = 1 + ((round * 97) % 400);
      const acknowledged = await runUntilKilled(dir, round, round % 2 ? 'self' : 'test', count);
      assert.ok(acknowledged.length >= count, `round ${round}: only ${acknowledged.length} of ${count} acknowledgements`);
      total += acknowledged.length;
      for (const line of acknowledged) {
        const [op, id, value] = line.split(' ');
        minimum.set(id!, Math.max(minimum.get(id!) ?? 0, op === 'update' ? Number(value) : 0));
      }
      const store = await open(dir);
      const byId = new Map((await docsOf(store, 'items')).map((doc) => [doc._id as string, doc.v as number]));
      const lost = [...minimum].filter(([id, v]) => !(byId.has(id) && byId.get(id)! >= v));
      assert.deepEqual(lost, [], `round ${round}: acknowledged writes lost (id, value)`);
      await store.close();
    }
    const rounds = round - 1;
    assert.ok(total >= rounds * 100, `${total} acknowledgements checked in ${rounds} rounds`);
    t.diagnostic(`${rounds} rounds, ${total} acknowledgements checked one by one`);
  });
});
