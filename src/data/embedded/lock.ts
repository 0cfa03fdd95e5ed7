/**
 * One process per data directory: a lock file holding the owner's pid. A lock
 * left by a process that no longer exists (it crashed) is taken over.
 */
import { closeSync, openSync, readFileSync, rmSync, unlinkSync, writeSync } from 'node:fs';
import { join } from 'node:path';
import type { Logger } from '../../log.js';
import { LOCK_FILE } from './files.js';

function isAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (error) {
    return (error as NodeJS.ErrnoException).code === 'EPERM'; // exists, owned by someone else
  }
}

function readOwner(path: string): number | undefined {
  try {
    const pid = Number.parseInt(readFileSync(path, 'utf8'), 10);
    return Number.isSafeInteger(pid) && pid > 0 ? pid : undefined;
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
    throw error;
  }
}

/** Takes the directory's lock; returns the function that releases it. */
export function acquireLock(dir: string, log: Logger): () => void {
  const path = join(dir, LOCK_FILE);
  // Two attempts: the second follows the removal of a stale lock.
  for (let attempt = 0; attempt < 2; attempt++) {
    try {
      const fd = openSync(path, 'wx');
      try {
        writeSync(fd, `${process.pid}\n`);
      } finally {
        closeSync(fd);
      }
      return () => {
        if (readOwner(path) === process.pid) unlinkSync(path);
      };
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== 'EEXIST') throw error;
    }
    const owner = readOwner(path);
    if (owner !== undefined && isAlive(owner)) throw new Error(`Data directory ${dir} is in use by process ${owner}`);
    log.warn('taking over a stale lock', { dir, pid: owner });
    rmSync(path, { force: true });
  }
  throw new Error(`Could not lock data directory ${dir}: another process keeps taking the lock`);
}
