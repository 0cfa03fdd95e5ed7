/**
 * What the fuzz program sends, deterministic for a seed: valid DDP messages
 * (calls, subscriptions, pings), mutated ones (fields dropped, retyped,
 * duplicated), messages nested past the depth limit, oversized ones, partial
 * ones (truncated text; on WebSockets also fragments and frames cut short),
 * binary frames, and garbage (random text, invalid UTF-8).
 */
import type { RandomGenerator } from '../../src/ddp/random.js';

export const KINDS = ['valid', 'mutated', 'nested', 'oversized', 'partial', 'binary', 'garbage'] as const;
export type FrameKind = (typeof KINDS)[number];

/** One thing to send: a DDP text, or raw bytes (binary frames, invalid UTF-8). */
export interface Generated {
  kind: FrameKind;
  text?: string;
  bytes?: Buffer;
}

/** Messages the fuzz app answers (see app.ts); ids and keys vary per message. */
function validMessage(random: RandomGenerator): unknown {
  const id = random.id(6);
  switch (Math.floor(random.fraction() * 8)) {
    case 0:
      return { msg: 'ping', id };
    // A few subscription ids per connection: repeated subs are ignored, unsubs find them.
    case 1:
      return { msg: 'sub', id: `s${Math.floor(random.fraction() * 3)}`, name: 'all', params: [] };
    case 2:
      return { msg: 'unsub', id: `s${Math.floor(random.fraction() * 3)}` };
    case 3:
      return { msg: 'method', id, method: 'add', params: [{ key: Math.floor(random.fraction() * 100), at: { $date: 1 }, data: { $binary: 'AAEC' } }], randomSeed: random.id(20) };
    case 4:
      return { msg: 'method', id, method: 'noSuchMethod', params: [] };
    default:
      return { msg: 'method', id, method: 'echo', params: [{ n: random.fraction(), s: random.secret(12), d: { $date: 5 }, inf: { $InfNaN: 1 } }] };
  }
}

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
  JSON.parse('{"__proto__":{"polluted":true}}') as unknown,
  { $escape: JSON.parse('{"__proto__":{"polluted":true}}') as unknown },
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

const KNOWN = [
  { msg: 'connect', version: '1', support: ['1', 'pre2', 'pre1'] },
  { msg: 'ping', id: 'p' },
  { msg: 'pong' },
  { msg: 'sub', id: 's', name: 'all', params: [] },
  { msg: 'unsub', id: 's' },
  { msg: 'method', id: 'm', method: 'echo', params: [{ $date: 1 }] },
  { msg: 'method', id: 'm', method: 'add', params: [{ a: { $binary: 'AAEC' }, b: { $InfNaN: 1 } }], randomSeed: 'abc' },
];

/** Mutated and truncated DDP messages and random text: what a confused or hostile client sends. */
export function fuzzMessages(random: RandomGenerator, count: number): string[] {
  const out: string[] = [];
  for (let i = 0; i < count; i++) {
    const roll = random.fraction();
    if (roll < 0.1) {
      out.push(random.secret(Math.floor(random.fraction() * 40)));
      continue;
    }
    const text = JSON.stringify(mutate(random, random.choice(KNOWN)));
    out.push(roll < 0.2 ? text.slice(0, Math.floor(random.fraction() * text.length)) : text);
  }
  return out;
}

/** How often each kind comes up. Oversized messages are rare: each is megabytes. */
const WEIGHTS: Record<FrameKind, number> = { valid: 0.4, mutated: 0.3, nested: 0.05, oversized: 0.0004, partial: 0.1, binary: 0.04, garbage: 0.1096 };

function nested(random: RandomGenerator): string {
  // Mostly just past the limit; now and then the 6,000 and 100,000 levels that once overflowed the stack.
  const roll = random.fraction();
  const depth = roll < 0.01 ? 100000 : roll < 0.05 ? 6000 : 129 + Math.floor(random.fraction() * 1000);
  const [open, close] = random.fraction() < 0.5 ? ['[', ']'] : ['{"a":', '}'];
  const value = open.repeat(depth) + (open === '[' ? '' : '1') + close.repeat(depth);
  return random.fraction() < 0.5 ? value : `{"msg":"method","id":"n","method":"echo","params":[${value}]}`;
}

export class FrameGenerator {
  constructor(
    private readonly random: RandomGenerator,
    /** The server's message limit: oversized messages go just past it or far past it. */
    private readonly maxMessageSize: number,
  ) {}

  pickKind(): FrameKind {
    let roll = this.random.fraction();
    for (const kind of KINDS) {
      roll -= WEIGHTS[kind];
      if (roll < 0) return kind;
    }
    return 'valid';
  }

  next(kind = this.pickKind()): Generated {
    const random = this.random;
    switch (kind) {
      case 'valid':
        return { kind, text: JSON.stringify(validMessage(random)) };
      case 'mutated':
        return { kind, text: JSON.stringify(mutate(random, validMessage(random))) };
      case 'nested':
        return { kind, text: nested(random) };
      case 'oversized': {
        const size = this.maxMessageSize + 1 + Math.floor(random.fraction() * random.choice([1024, this.maxMessageSize]));
        return { kind, text: `{"msg":"method","id":"big","method":"echo","params":["${'x'.repeat(size)}"]}` };
      }
      case 'partial': {
        const text = JSON.stringify(validMessage(random));
        return { kind, text: text.slice(0, 1 + Math.floor(random.fraction() * (text.length - 1))) };
      }
      case 'binary':
        return { kind, bytes: Buffer.from(random.fraction() < 0.5 ? JSON.stringify(validMessage(random)) : random.secret(32)) };
      case 'garbage':
        if (random.fraction() < 0.1) return { kind, bytes: Buffer.from([0x7b, 0x22, 0xc3, 0x28, 0xff, 0xfe]) }; // invalid UTF-8
        return { kind, text: random.secret(Math.floor(random.fraction() * 64)) };
    }
  }
}
