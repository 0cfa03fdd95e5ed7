/**
 * Mutated DDP messages for fuzzing: valid messages with fields dropped, retyped,
 * duplicated or truncated, plus random bytes. Deterministic for a given generator.
 */
import type { RandomGenerator } from '../src/ddp/random.js';

const VALID: unknown[] = [
  { msg: 'connect', version: '1', support: ['1', 'pre2', 'pre1'] },
  { msg: 'ping', id: 'p' },
  { msg: 'pong' },
  { msg: 'sub', id: 's', name: 'all', params: [] },
  { msg: 'unsub', id: 's' },
  { msg: 'method', id: 'm', method: 'echo', params: [{ $date: 1 }] },
  { msg: 'method', id: 'm', method: 'add', params: [{ a: { $binary: 'AAEC' }, b: { $InfNaN: 1 } }], randomSeed: 'abc' },
];

const ODD_VALUES: unknown[] = [
  null,
  true,
  0,
  -1,
  1e308,
  '',
  'x'.repeat(300),
  [],
  [[[]]],
  {},
  { $date: 'x' },
  { $type: 'oid', $value: 'zz' },
  { $escape: 5 },
  { $regexp: '(', $flags: 'g' },
  '\u0000\u2028\ud800',
  { __proto__: { polluted: true } },
  { constructor: { prototype: { polluted: true } } },
];

function mutate(random: RandomGenerator, value: unknown, depth = 0): unknown {
  if (depth > 3) return random.choice(ODD_VALUES);
  if (Array.isArray(value)) {
    const copy = value.map((v) => mutate(random, v, depth + 1));
    if (random.fraction() < 0.3) copy.push(random.choice(ODD_VALUES));
    return copy;
  }
  if (value !== null && typeof value === 'object') {
    const out: Record<string, unknown> = {};
    for (const [key, v] of Object.entries(value)) {
      const roll = random.fraction();
      if (roll < 0.1) continue; // drop the field
      out[key] = roll < 0.3 ? random.choice(ODD_VALUES) : mutate(random, v, depth + 1);
    }
    if (random.fraction() < 0.1) out[random.id(3)] = random.choice(ODD_VALUES);
    return out;
  }
  return random.fraction() < 0.3 ? random.choice(ODD_VALUES) : value;
}

export function fuzzMessages(random: RandomGenerator, count: number): string[] {
  const out: string[] = [];
  for (let i = 0; i < count; i++) {
    const roll = random.fraction();
    if (roll < 0.1) {
      out.push(random.secret(Math.floor(random.fraction() * 40)));
      continue;
    }
    const text = JSON.stringify(mutate(random, random.choice(VALID)));
    // Sometimes truncate the JSON mid-way.
    out.push(roll < 0.2 ? text.slice(0, Math.floor(random.fraction() * text.length)) : text);
  }
  return out;
}
