/**
 * Meteor-compatible random ids. A method's inserts must produce the same ids as the
 * client's stub, so the seeded generator is Alea with Mash exactly as Meteor's
 * `random` package has it (hand-written: no maintained npm package reproduces
 * Meteor's seeded streams).
 */

const UNMISTAKABLE_CHARS = '23456789ABCDEFGHJKLMNPQRSTWXYZabcdefghijkmnopqrstuvwxyz';
const BASE64_CHARS = 'abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_';
const HEX_CHARS = '0123456789abcdef';
const TWO_POW_MINUS_32 = 2.3283064365386963e-10;

export abstract class RandomGenerator {
  /** A number in [0, 1). */
  abstract fraction(): number;

  choice<T extends string | readonly unknown[]>(arrayOrString: T): T[number] {
    return arrayOrString[Math.floor(this.fraction() * arrayOrString.length)];
  }

  protected randomString(count: number, alphabet: string): string {
    let out = '';
    for (let i = 0; i < count; i++) out += alphabet[Math.floor(this.fraction() * alphabet.length)];
    return out;
  }

  /** Meteor's document id: 17 characters from an alphabet without look-alikes. */
  id(count = 17): string {
    return this.randomString(count, UNMISTAKABLE_CHARS);
  }

  hexString(digits: number): string {
    return this.randomString(digits, HEX_CHARS);
  }

  secret(count = 43): string {
    return this.randomString(count, BASE64_CHARS);
  }
}

function mash(): (data: unknown) => number {
  let n = 0xefc8249d;
  return (data: unknown) => {
    const text = String(data);
    for (let i = 0; i < text.length; i++) {
      n += text.charCodeAt(i);
      let h = 0.02519603282416938 * n;
      n = h >>> 0;
      h -= n;
      h *= n;
      n = h >>> 0;
      h -= n;
      n += h * 0x100000000;
    }
    return (n >>> 0) * TWO_POW_MINUS_32;
  };
}

/** Johannes Baagøe's Alea PRNG, as seeded by Meteor's `Random.createWithSeeds`. */
export class AleaRandomGenerator extends RandomGenerator {
  private s0: number;
  private s1: number;
  private s2: number;
  private c = 1;

  constructor(seeds: readonly unknown[]) {
    super();
    if (seeds.length === 0) throw new Error('Alea needs at least one seed');
    const m = mash();
    this.s0 = m(' ');
    this.s1 = m(' ');
    this.s2 = m(' ');
    for (const seed of seeds) {
      this.s0 -= m(seed);
      if (this.s0 < 0) this.s0 += 1;
      this.s1 -= m(seed);
      if (this.s1 < 0) this.s1 += 1;
      this.s2 -= m(seed);
      if (this.s2 < 0) this.s2 += 1;
    }
  }

  fraction(): number {
    const t = 2091639 * this.s0 + this.c * TWO_POW_MINUS_32;
    this.s0 = this.s1;
    this.s1 = this.s2;
    this.c = t | 0;
    this.s2 = t - this.c;
    return this.s2;
  }
}

/** Cryptographically strong randomness (Web Crypto, in Node and browsers), drawn in blocks. */
export class CryptoRandomGenerator extends RandomGenerator {
  private pool = new Uint32Array(256);
  private next = this.pool.length;

  fraction(): number {
    if (this.next === this.pool.length) {
      globalThis.crypto.getRandomValues(this.pool);
      this.next = 0;
    }
    return this.pool[this.next++]! * TWO_POW_MINUS_32;
  }
}

/** Process-wide secure generator, Meteor's `Random`. */
export const Random: RandomGenerator = new CryptoRandomGenerator();

export function createWithSeeds(...seeds: unknown[]): RandomGenerator {
  return new AleaRandomGenerator(seeds);
}

/**
 * Per-invocation stream of named, independently seeded sequences (Meteor's
 * `RandomStream`): the sequence `name` is Alea seeded with `(seed, name)`.
 */
export class RandomStream {
  readonly seed: string;
  private readonly sequences = new Map<string, RandomGenerator>();

  constructor(seed?: string) {
    this.seed = seed ?? Random.hexString(20);
  }

  sequence(name: string): RandomGenerator {
    let generator = this.sequences.get(name);
    if (!generator) {
      generator = new AleaRandomGenerator([this.seed, name]);
      this.sequences.set(name, generator);
    }
    return generator;
  }
}

/** The id an insert into `collection` gets inside a method with this stream. */
export function collectionIdSequence(stream: RandomStream, collection: string): RandomGenerator {
  return stream.sequence(`/collection/${collection}`);
}

/** Seed for a method called from inside another invocation (same on client and server). */
export function makeRpcSeed(enclosing: RandomStream | undefined, methodName: string): string {
  return enclosing ? enclosing.sequence(`/rpc/${methodName}`).hexString(20) : Random.hexString(20);
}
