/**
 * The process's memory figures, read without ever throwing. Node reads the
 * resident size from /proc, which takes a file descriptor: with every one in
 * use (a flood of connections), process.memoryUsage() throws EMFILE, and a
 * sampler's timer that called it stopped the process. The last figures read
 * stand in until a descriptor is free again.
 */
let last: NodeJS.MemoryUsage = { rss: 0, heapTotal: 0, heapUsed: 0, external: 0, arrayBuffers: 0 };

export function memoryUsage(): NodeJS.MemoryUsage {
  try {
    last = process.memoryUsage();
  } catch {
    // Out of descriptors: keep the last figures.
  }
  return last;
}

/** Resident memory, bytes. */
export function residentBytes(): number {
  return memoryUsage().rss;
}
