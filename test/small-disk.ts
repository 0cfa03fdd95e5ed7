/**
 * A small tmpfs a test can fill to the last byte and free again: a real full
 * disk, not a mock. Mounting needs root; `smallDiskSkip` is the skip reason
 * when it cannot.
 */
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { needs } from './skips.js';

function tryMount(dir: string, bytes: number): string | undefined {
  const mounted = spawnSync('mount', ['-t', 'tmpfs', '-o', `size=${bytes}`, 'tmpfs', dir], { encoding: 'utf8' });
  return mounted.status === 0 ? undefined : (mounted.stderr || mounted.error?.message || `mount exited with ${mounted.status}`).trim();
}

function probe(): string | undefined {
  if (process.getuid?.() !== 0) return needs('root (to mount a small tmpfs)', 'run the tests as root');
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'perseid-disk-probe-'));
  try {
    const failure = tryMount(dir, 1 << 20);
    if (failure) return needs(`a tmpfs mount (mount said: ${failure})`, 'run the tests as root where mount -t tmpfs works');
    spawnSync('umount', [dir]);
    return undefined;
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
}

/** Why a full-disk test cannot run here, or undefined when it can. */
export const smallDiskSkip = probe();

export interface SmallDisk {
  /** The mount point. */
  dir: string;
  /** Writes a file until the disk is full; returns its size. */
  fill(): number;
  /** Deletes what fill() wrote. */
  free(): void;
  /** Unmounts and removes the mount point. */
  remove(): void;
}

export function smallDisk(bytes: number): SmallDisk {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'perseid-disk-'));
  const failure = tryMount(dir, bytes);
  if (failure) throw new Error(`mount: ${failure}`);
  const filler = path.join(dir, 'filler');
  return {
    dir,
    fill() {
      const fd = fs.openSync(filler, 'a');
      let size = 0;
      try {
        // Big chunks first, then down to one byte, until not one more fits.
        for (let chunk = 1 << 20; chunk >= 1; ) {
          try {
            const written = fs.writeSync(fd, Buffer.alloc(chunk));
            size += written;
            if (written < chunk) chunk = Math.floor(chunk / 2);
          } catch (error) {
            if ((error as NodeJS.ErrnoException).code !== 'ENOSPC') throw error;
            chunk = Math.floor(chunk / 2);
          }
        }
      } finally {
        fs.closeSync(fd);
      }
      return size;
    },
    free() {
      fs.rmSync(filler, { force: true });
    },
    remove() {
      spawnSync('umount', ['-l', dir]);
      fs.rmSync(dir, { recursive: true, force: true });
    },
  };
}
