/**
 * Repair of a damaged data directory (`perseid store repair`): every intact
 * record is kept, every damaged one is set aside in a file, and the store is
 * rewritten as one snapshot of what was kept.
 *
 * The steps are safe to interrupt anywhere. The original files are first
 * hard-linked into a `repair-<time>/` folder beside the damaged records' file
 * (no copy, no extra space); the new snapshot is then written and renamed
 * into place, starting a log generation of its own, so from that instant
 * recovery ignores the old logs; only then are the originals removed from the
 * directory (their links in the folder stay).
 */
import { existsSync, linkSync, mkdirSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { basename, join } from 'node:path';
import { createLogger } from '../../log.js';
import { EmbeddedCollection, type CollectionHost } from './collection.js';
import { fsyncDir, listDataFiles, snapshotFileName } from './files.js';
import { acquireLock } from './lock.js';
import type { DamagedRecord, Mutation } from './records.js';
import { recover } from './recovery.js';
import { writeSnapshot } from './snapshot.js';
import { StoreDamagedError, StoreError } from './store-errors.js';

export interface RepairReport {
  /** True when the store opened as it was: nothing was changed. */
  healthy: boolean;
  /** Records kept, per file read. */
  files: Array<{ file: string; records: number }>;
  damaged: DamagedRecord[];
  lastSeq: number;
  collections: number;
  documents: number;
  /** The folder holding the damaged records (`damaged.log`) and the original files; none for a dry run or a healthy store. */
  setAside: string | undefined;
}

export interface RepairOptions {
  /** Report what repair would do and change nothing. */
  dryRun?: boolean;
}

/** A host for collections that only replay: nothing here reads or writes through them. */
function replayHost(): CollectionHost {
  const refuse = (): never => {
    throw new Error('a collection being repaired takes no writes');
  };
  return { loggedSeq: () => 0, assertOpen: () => undefined, assertWritable: refuse, commit: refuse };
}

function stamp(): string {
  return new Date().toISOString().replace(/[-:]/g, '').replace('T', '-').slice(0, 15);
}

function damagedFile(damaged: readonly DamagedRecord[]): string {
  return damaged.map((d) => `# ${basename(d.file)} line ${d.line}: ${d.reason}\n${d.text}\n`).join('');
}

export async function repairStore(dir: string, options: RepairOptions = {}): Promise<RepairReport> {
  if (!existsSync(dir)) throw new StoreError('STORE_NOT_FOUND', `There is no data directory at ${dir}`);
  if (!statSync(dir).isDirectory()) throw new StoreError('STORE_NOT_FOUND', `${dir} is a file, not a data directory: give the store's directory with --data-dir`);
  const release = lockForRepair(dir);
  try {
    return await repairLocked(dir, options);
  } finally {
    release();
  }
}

/** The directory's lock, or one line when the directory cannot be written (an operator who is not the server's user, a read-only mount). */
function lockForRepair(dir: string): () => void {
  try {
    return acquireLock(dir);
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code;
    if (error instanceof StoreError || code === undefined) throw error;
    throw new StoreError('STORE_NOT_WRITABLE', `cannot write in ${dir} (${code}): repair takes its lock and rewrites it; run it as the user the server runs as, on a read-write mount`);
  }
}

async function repairLocked(dir: string, options: RepairOptions): Promise<RepairReport> {
  const log = createLogger('store-repair');
  const collections = new Map<string, EmbeddedCollection>();
  const host = replayHost();
  const collection = (name: string): EmbeddedCollection => {
    let c = collections.get(name);
    if (!c) collections.set(name, (c = new EmbeddedCollection(name, host)));
    return c;
  };
  const report = (healthy: boolean, files: RepairReport['files'], damaged: DamagedRecord[], lastSeq: number, setAside?: string): RepairReport => {
    const full = [...collections.values()].filter((c) => c.size > 0);
    return { healthy, files, damaged, lastSeq, collections: full.length, documents: full.reduce((n, c) => n + c.size, 0), setAside };
  };

  // First as opening would read it (falling back to older files where they still cover everything).
  try {
    const files: RepairReport['files'] = [];
    const { lastSeq } = recover(dir, (m) => collection(m.collection).apply(m), log, { readOnly: true, onFile: (file, records) => files.push({ file, records }) });
    return report(true, files, [], lastSeq);
  } catch (error) {
    if (!(error instanceof StoreDamagedError)) throw error;
    collections.clear();
  }

  const files: RepairReport['files'] = [];
  const damaged: DamagedRecord[] = [];
  const replay = (mutation: Mutation): void => {
    const target = collection(mutation.collection);
    target.checkReplay(mutation);
    target.apply(mutation);
  };
  const recovered = recover(dir, replay, log, { onDamaged: (d) => damaged.push(d), onFile: (file, records) => files.push({ file, records }) });
  if (options.dryRun) return report(false, files, damaged, recovered.lastSeq);

  const aside = join(dir, `repair-${stamp()}`);
  mkdirSync(aside);
  writeFileSync(join(aside, 'damaged.log'), damagedFile(damaged));
  const originals = listDataFiles(dir);
  const paths = [...originals.logs.map((l) => l.path), ...originals.snapshots.map((s) => s.path), ...originals.temporary];
  for (const path of paths) linkSync(path, join(aside, basename(path)));
  fsyncDir(aside);

  const images = [...collections.values()].map((c) => c.image()).filter((image) => image.docs.length > 0 || image.indexes.length > 0);
  await writeSnapshot(dir, recovered.lastSeq, recovered.generation + 1, images);
  const kept = join(dir, snapshotFileName(recovered.lastSeq));
  for (const path of paths) if (path !== kept) rmSync(path);
  fsyncDir(dir);
  return report(false, files, damaged, recovered.lastSeq, aside);
}
