/**
 * The primary's side of "one change source for the machine": it follows each
 * collection some worker watches, once, and forwards every change of it to the
 * workers that watch it (serialised once for all of them).
 */
import { stringify } from '../ddp/ejson.js';
import type { ChangeEvent, ChangeSource } from '../data/change-source.js';
import type { PrimaryToWorker } from './ipc-messages.js';

export interface WorkerLink {
  send(message: PrimaryToWorker): void;
}

interface Followed {
  unwatch(): void;
  workers: Set<WorkerLink>;
  ready: Promise<void>;
}

export class ChangeForwarder {
  private readonly followed = new Map<string, Followed>();
  private readonly byWorker = new Map<WorkerLink, Set<string>>();

  constructor(private readonly source: ChangeSource) {}

  /** Replaces the set of collections `worker` watches. */
  setWatched(worker: WorkerLink, collections: readonly string[]): void {
    const next = new Set(collections);
    const previous = this.byWorker.get(worker) ?? new Set<string>();
    this.byWorker.set(worker, next);
    for (const name of previous) if (!next.has(name)) this.leave(worker, name);
    for (const name of next) if (!previous.has(name)) this.join(worker, name);
  }

  removeWorker(worker: WorkerLink): void {
    this.setWatched(worker, []);
    this.byWorker.delete(worker);
  }

  private join(worker: WorkerLink, collection: string): void {
    let followed = this.followed.get(collection);
    if (!followed) {
      const workers = new Set<WorkerLink>();
      const unwatch = this.source.watch(collection, (event: ChangeEvent) => {
        const message: PrimaryToWorker = { type: 'change', event: stringify(event) };
        for (const w of workers) w.send(message);
      });
      followed = { unwatch, workers, ready: Promise.resolve(this.source.ready?.(collection)) };
      this.followed.set(collection, followed);
    }
    followed.workers.add(worker);
    void followed.ready.then(() => {
      if (this.followed.get(collection)?.workers.has(worker)) worker.send({ type: 'watching', collection });
    });
  }

  private leave(worker: WorkerLink, collection: string): void {
    const followed = this.followed.get(collection);
    if (!followed) return;
    followed.workers.delete(worker);
    if (followed.workers.size === 0) {
      followed.unwatch();
      this.followed.delete(collection);
    }
  }
}
