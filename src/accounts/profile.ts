/**
 * What a client's createUser may put in `profile`: at most `maxBytes` of JSON
 * (a flood of sign-ups with megabyte profiles cost gigabytes of store), and
 * no key that starts with `$` or holds a `.`: FerretDB refuses such keys at
 * any depth, so the same sign-up was stored on the embedded store and on
 * mongo-java-server but failed there with 500 "Internal server error".
 */
import { refusedKey } from '../data/refused-key.js';
import { EJSON } from '../ddp/ejson.js';
import { AccountsErrors } from './errors.js';

/** A profile is a name, a picture's URL, a few settings. */
export const MAX_PROFILE_BYTES = 16 * 1024;

/** Throws the error a client gets for a profile it may not store. */
export function checkProfile(profile: unknown, maxBytes: number): void {
  if (profile === undefined) return;
  if (Buffer.byteLength(EJSON.stringify(profile)) > maxBytes) throw AccountsErrors.profileTooLarge({ limit: maxBytes });
  const key = refusedKey(profile);
  if (key !== undefined) throw AccountsErrors.profileKey({ key: JSON.stringify(key.slice(0, 100)) });
}
