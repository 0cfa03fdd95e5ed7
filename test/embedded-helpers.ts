/**
 * What the embedded store's suites share: temporary data directories and
 * stores, closed and removed after each test, and the log lines the store
 * writes (captured instead of printed).
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { after, afterEach, before } from 'node:test';
import { openEmbeddedStore, type EmbeddedStore, type EmbeddedStoreOptions } from '../src/data/embedded/store.js';
import type { Document, QuerySpec } from '../src/data/types.js';
import { setLogSink } from '../src/log.js';

export const logLines: string[] = [];
before(() => setLogSink((line) => logLines.push(line)));
after(() => setLogSink((line) => process.stderr.write(line + '\n')));

const dirs: string[] = [];
const stores: EmbeddedStore[] = [];

afterEach(async () => {
  for (const store of stores.splice(0)) await store.close().catch(() => undefined);
  for (const dir of dirs.splice(0)) fs.rmSync(dir, { recursive: true, force: true });
});

/** A fresh directory, removed after the test. */
export function tempDir(): string {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'perseid-embedded-'));
  dirs.push(dir);
  return dir;
}

/** Opens a store, closed after the test if it is still open. */
export async function open(dir: string, options: Omit<EmbeddedStoreOptions, 'dir'> = {}): Promise<EmbeddedStore> {
  const store = await openEmbeddedStore({ dir, ...options });
  stores.push(store);
  return store;
}

/** Every document of `collection`, in natural order. */
export async function docsOf(store: EmbeddedStore, collection = 'c'): Promise<Document[]> {
  const spec: QuerySpec = { collection, selector: {} };
  return (await store.collection(collection).find(spec)).docs;
}

/** The test's copy of a data directory committed under test/fixtures. */
export function fixtureCopy(name: string): string {
  const dir = tempDir();
  fs.cpSync(new URL(`../../test/fixtures/${name}`, import.meta.url), dir, { recursive: true });
  return dir;
}
