/**
 * One process per data directory, enforced by the kernel: an exclusive lock
 * on the directory's LOCK file (an open-file-description `fcntl` lock on
 * Linux, `flock` on macOS, `LockFileEx` on Windows, through
 * fs-native-extensions, since Node has no file locks of its own). The kernel
 * drops it when the process dies however it dies, so nothing is ever stale: a
 * pid left in the file by a crash, a pid since reused, or a process in
 * another pid namespace (another container on the same volume) cannot
 * mislead it. The file's text (pid, host, start time) only explains a refusal.
 */
import { closeSync, constants, ftruncateSync, openSync, readFileSync, writeSync } from 'node:fs';
import { hostname } from 'node:os';
import { join } from 'node:path';
import { tryLock } from 'fs-native-extensions';
import { LOCK_FILE } from './files.js';
import { StoreInUseError } from './store-errors.js';

function holderOf(path: string): string {
  try {
    const text = readFileSync(path, 'utf8').trim();
    if (/^\d+$/.test(text)) return `pid ${text}`; // written by a version before the kernel lock
    return text || 'no details recorded';
  } catch {
    return 'no details recorded';
  }
}

/** Takes the directory's lock or throws StoreInUseError; returns the function that releases it. */
export function acquireLock(dir: string): () => void {
  const path = join(dir, LOCK_FILE);
  const fd = openSync(path, constants.O_RDWR | constants.O_CREAT, 0o644);
  try {
    if (!tryLock(fd)) throw new StoreInUseError(dir, holderOf(path));
    ftruncateSync(fd, 0);
    writeSync(fd, `pid ${process.pid} on ${hostname()} since ${new Date().toISOString()}\n`, 0);
  } catch (error) {
    closeSync(fd); // releases the lock if it was taken
    throw error;
  }
  // The file stays: deleting it would let a process that opened it just before lock a file no one else sees.
  let released = false;
  return () => {
    if (released) return;
    released = true;
    closeSync(fd);
  };
}
