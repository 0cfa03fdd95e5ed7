/**
 * Runs tasks one at a time, taking turns between keys: each key's tasks run
 * in order, and a key with many waiting gets one turn per round like any
 * other. Written here because the queue libraries (p-queue and kin) order by
 * priority, not by turns between senders.
 */
export class FairQueue {
  /** Waiting tasks per key; a Map keeps keys in the order their turn comes. */
  private readonly waiting = new Map<string, Array<() => Promise<void>>>();
  private busy = false;

  /** Runs `work` when its key's turn comes; resolves or rejects as it does. */
  run<T>(key: string, work: () => Promise<T>): Promise<T> {
    return new Promise<T>((resolve, reject) => {
      // Through a promise, so a task that throws at once rejects its caller instead of stopping the queue.
      const task = () => Promise.resolve().then(work).then(resolve, reject);
      const queue = this.waiting.get(key);
      if (queue) queue.push(task);
      else this.waiting.set(key, [task]);
      if (!this.busy) void this.drain();
    });
  }

  private async drain(): Promise<void> {
    this.busy = true;
    for (let next = this.waiting.entries().next(); !next.done; next = this.waiting.entries().next()) {
      const [key, queue] = next.value;
      const task = queue.shift()!;
      // To the back of the line: every other key waiting goes first.
      this.waiting.delete(key);
      if (queue.length > 0) this.waiting.set(key, queue);
      await task();
    }
    this.busy = false;
  }
}
