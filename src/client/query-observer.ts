/**
 * The live results of one local query: recomputed when a change touches a
 * document the query selects (or selected), and compared with the previous
 * results to say what was added, changed, moved and removed, in a sequence
 * that turns the old ordered results into the new ones. Result objects stay
 * the same while their document does not change, so a UI can compare them by
 * identity.
 */
import type { Document, DocumentChange } from './documents.js';
import { changedFields, project, runQuery, type CompiledQuery } from './local-query.js';

export type ResultChange =
  | { type: 'added'; id: string; doc: Document; before: string | null }
  | { type: 'moved'; id: string; doc: Document; before: string | null }
  | { type: 'changed'; id: string; doc: Document; previous: Document; fields: Record<string, unknown> }
  | { type: 'removed'; id: string; doc: Document };

interface Entry {
  /** The store's document the result was projected from. */
  source: Document;
  /** The result as returned (the projection of `source`). */
  doc: Document;
}

export class QueryObserver {
  private entries = new Map<string, Entry>();
  private order: string[] = [];
  private current: readonly Document[] = [];

  constructor(
    private readonly docs: ReadonlyMap<string, Document>,
    private readonly query: CompiledQuery,
    private readonly emit: (changes: readonly ResultChange[]) => void,
  ) {}

  /** The results, in query order; a new array after each change, the same one until then. */
  get results(): readonly Document[] {
    return this.current;
  }

  /** Whether a change to a document can alter the results. */
  affectedBy(change: DocumentChange): boolean {
    if (this.entries.has(change.id)) return true;
    if (this.query.ids && !this.query.ids.includes(change.id)) return false;
    return this.query.matches(change.doc) || (change.type === 'changed' && this.query.matches(change.previous));
  }

  /** Recomputes the results and reports the differences (all of them as `added` the first time). */
  refresh(): void {
    const found = runQuery(this.docs, this.query);
    const next = new Map<string, Entry>();
    for (const [id, source] of found) {
      const known = this.entries.get(id);
      next.set(id, known && known.source === source ? known : { source, doc: project(this.query, source) });
    }
    const changes = this.diff(next);
    if (changes.length === 0) return;
    this.current = this.order.map((id) => next.get(id)!.doc);
    this.emit(changes);
  }

  private diff(next: Map<string, Entry>): ResultChange[] {
    const changes: ResultChange[] = [];
    const previous = this.entries;
    const working = this.order.filter((id) => {
      if (next.has(id)) return true;
      changes.push({ type: 'removed', id, doc: previous.get(id)!.doc });
      return false;
    });
    for (const id of working) {
      const before = previous.get(id)!;
      const after = next.get(id)!;
      if (before === after) continue;
      const fields = changedFields(before.doc, after.doc);
      if (fields) changes.push({ type: 'changed', id, doc: after.doc, previous: before.doc, fields });
      // Only fields the projection leaves out changed: the result keeps its object.
      else next.set(id, { source: after.source, doc: before.doc });
    }
    const target = [...next.keys()];
    if (working.length === 0) {
      // Nothing to keep in place (the first results): append in order.
      for (const id of target) changes.push({ type: 'added', id, doc: next.get(id)!.doc, before: null });
      this.entries = next;
      this.order = target;
      return changes;
    }
    // From the end: once positions i+1.. match, put the id of position i right before them.
    // An id already there is the last of `working` not yet placed: `last` walks back to it,
    // so the whole pass is linear (a list of thousands is refreshed on every change).
    const placed = new Set<string>();
    let last = working.length - 1;
    for (let i = target.length - 1; i >= 0; i--) {
      const id = target[i]!;
      const before = target[i + 1] ?? null;
      while (last >= 0 && placed.has(working[last]!)) last--;
      if (!previous.has(id)) changes.push({ type: 'added', id, doc: next.get(id)!.doc, before });
      else if (working[last] !== id) changes.push({ type: 'moved', id, doc: next.get(id)!.doc, before });
      placed.add(id);
    }
    this.entries = next;
    this.order = target;
    return changes;
  }
}
