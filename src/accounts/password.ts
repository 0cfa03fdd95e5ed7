/**
 * Passwords as Meteor stores them: the client sends the SHA-256 hex digest of
 * the password (or the password itself, which the server digests), and the
 * server keeps bcrypt of that digest at 10 rounds in
 * `services.password.bcrypt`, so a Meteor app's users log in unchanged
 * (bcryptjs: pure JavaScript, nothing to compile). With argon2 on (Meteor
 * 3.1's `argon2Enabled`), new hashes are argon2id with Meteor's parameters in
 * `services.password.argon2` (through the optional `@node-rs/argon2`, prebuilt
 * binaries), and a bcrypt hash moves to argon2 at the user's next login (and
 * back when argon2 is turned off).
 */
import { createHash, randomBytes } from 'node:crypto';
import type * as Argon2 from '@node-rs/argon2';
import bcrypt from 'bcryptjs';
import { FairQueue } from '../fair-queue.js';
import { addressGroup } from '../server/address-group.js';
import { Match, type Pattern } from '../validation/check.js';

/** What a client may send as a password: the plain string, or `{digest, algorithm: 'sha-256'}`. */
export type PasswordInput = string | { digest: string; algorithm: 'sha-256' };

export const DEFAULT_BCRYPT_ROUNDS = 10;

export interface Argon2Params {
  type: 'argon2id' | 'argon2i' | 'argon2d';
  timeCost: number;
  memoryCost: number;
  parallelism: number;
}

/** Meteor's argon2 defaults (accounts-password 3.1). */
export const METEOR_ARGON2: Argon2Params = { type: 'argon2id', timeCost: 2, memoryCost: 19456, parallelism: 1 };

/** Meteor's passwordValidator, with its intended 256-character cap on plain strings enforced. */
export function passwordPattern(maxLength: number): Pattern {
  return Match.OneOf(
    Match.Where((value) => typeof value === 'string' && value.length <= maxLength),
    { digest: Match.Where((value) => typeof value === 'string' && value.length === 64), algorithm: Match.OneOf('sha-256') },
  );
}

export function sha256Hex(text: string): string {
  return createHash('sha256').update(text).digest('hex');
}

/** The string that is hashed: the SHA-256 hex digest, as the client sent it or made here. */
export function passwordDigest(password: PasswordInput): string {
  return typeof password === 'string' ? sha256Hex(password) : password.digest;
}

/**
 * bcryptjs works on the event loop in slices of up to 100 ms, each queued with
 * setImmediate: n hashes at once run n slices back to back before any I/O
 * (250 failed logins stalled every client for 25 s). One at a time, the other
 * clients are served between slices; and in turns between client addresses,
 * so one address's burst of logins does not make everyone else's wait behind
 * it (250 from one address delayed another's login by 19 s).
 */
const bcryptTurns = new FairQueue();

/** `from`: the client address the hash is for (undefined: the server's own work), which takes turns with the others. */
export function hashPassword(password: PasswordInput, rounds = DEFAULT_BCRYPT_ROUNDS, from?: string): Promise<string> {
  return bcryptTurns.run(turnOf(from), () => bcrypt.hash(passwordDigest(password), rounds));
}

export function checkPassword(password: PasswordInput, hash: string, from?: string): Promise<boolean> {
  return bcryptTurns.run(turnOf(from), () => bcrypt.compare(passwordDigest(password), hash));
}

/** Whose turn a hash is: the client's address group (an IPv6 /64), or '' for the server's own. */
function turnOf(from: string | undefined): string {
  return from === undefined ? '' : addressGroup(from);
}

/** Rounds a stored hash was made with (`$2b$10$...` → 10); NaN for something else. */
export function roundsOf(hash: string): number {
  return Number(hash.substring(4, 6));
}

type Argon2Module = typeof Argon2;
let argon2Module: Promise<Argon2Module> | undefined;

function argon2(): Promise<Argon2Module> {
  argon2Module ??= import('@node-rs/argon2').catch((error: unknown) => {
    argon2Module = undefined;
    throw new Error(`argon2 needs the optional package @node-rs/argon2 (npm install @node-rs/argon2): ${String(error)}`);
  });
  return argon2Module;
}

/** The parameters in a PHC string (`$argon2id$v=19$m=19456,t=2,p=1$...`). */
export function argon2ParamsOf(hash: string): Argon2Params | undefined {
  const match = /^\$(argon2id|argon2i|argon2d)\$v=\d+\$m=(\d+),t=(\d+),p=(\d+)\$/.exec(hash);
  if (!match) return undefined;
  return { type: match[1] as Argon2Params['type'], memoryCost: Number(match[2]), timeCost: Number(match[3]), parallelism: Number(match[4]) };
}

export interface StoredPassword {
  bcrypt?: string;
  argon2?: string;
}

/** Hashes and verifies with the configured algorithm, and says when a stored hash should be redone. */
export class PasswordHasher {
  /** A hash of nothing anyone knows, made at the first login that has no hash to check (decoy()). */
  private decoyHash: Promise<StoredPassword> | undefined;

  constructor(
    readonly bcryptRounds = DEFAULT_BCRYPT_ROUNDS,
    /** argon2 parameters when argon2 is on; undefined for bcrypt. */
    readonly argon2Params?: Argon2Params,
  ) {}

  /** Checks that argon2, when on, can be loaded (at start, rather than at the first login). */
  async ready(): Promise<void> {
    if (this.argon2Params) await argon2();
  }

  /**
   * The `services.password` fields for a new password: `$set` the hash, `$unset` the other kind. `from`, here
   * and below, is the client address the work is for (see hashPassword).
   */
  async fields(password: PasswordInput, from?: string): Promise<{ set: Record<string, string>; unset: Record<string, 1> }> {
    if (!this.argon2Params) {
      return { set: { 'services.password.bcrypt': await hashPassword(password, this.bcryptRounds, from) }, unset: { 'services.password.argon2': 1 } };
    }
    const { hash, Algorithm } = await argon2();
    const { type, timeCost, memoryCost, parallelism } = this.argon2Params;
    const algorithm = { argon2id: Algorithm.Argon2id, argon2i: Algorithm.Argon2i, argon2d: Algorithm.Argon2d }[type];
    const hashed = await hash(passwordDigest(password), { algorithm, timeCost, memoryCost, parallelism });
    return { set: { 'services.password.argon2': hashed }, unset: { 'services.password.bcrypt': 1 } };
  }

  /** The stored form of a new password, for a new user document. */
  async stored(password: PasswordInput, from?: string): Promise<StoredPassword> {
    const { set } = await this.fields(password, from);
    return Object.fromEntries(Object.entries(set).map(([path, value]) => [path.slice('services.password.'.length), value]));
  }

  /** Whether `password` matches; `rehash` when the stored hash is of the other kind or other parameters. */
  async verify(password: PasswordInput, stored: StoredPassword | undefined, from?: string): Promise<{ ok: boolean; rehash: boolean }> {
    if (stored?.argon2) {
      const ok = await (await argon2()).verify(stored.argon2, passwordDigest(password));
      const params = argon2ParamsOf(stored.argon2);
      const want = this.argon2Params;
      const same = want && params && (Object.keys(want) as Array<keyof Argon2Params>).every((key) => want[key] === params[key]);
      return { ok, rehash: ok && !same };
    }
    if (stored?.bcrypt) {
      const ok = await checkPassword(password, stored.bcrypt, from);
      return { ok, rehash: ok && (this.argon2Params !== undefined || roundsOf(stored.bcrypt) !== this.bcryptRounds) };
    }
    return { ok: false, rehash: false };
  }

  /**
   * Verifies `password` against a decoy hash of the configured kind and cost,
   * for a login with no hash to check (no such user, or no password set): its
   * reply then takes as long as a wrong password's, so its timing does not
   * tell a stranger whether the account exists.
   */
  async decoy(password: PasswordInput, from?: string): Promise<void> {
    this.decoyHash ??= this.stored(randomBytes(32).toString('hex'));
    await this.verify(password, await this.decoyHash, from);
  }
}

export function hasPassword(stored: StoredPassword | undefined): boolean {
  return Boolean(stored?.bcrypt || stored?.argon2);
}
