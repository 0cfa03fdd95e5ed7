/**
 * Meteor's hot code push, client side: the server publishes the app's version
 * (`perseid_autoupdate`, which `perseid dev` changes on every restart); when a
 * different one arrives the page reloads, or, with `hotCodePush: 'keep'`, stays
 * (its subscriptions were re-sent to the new server on reconnect) and the
 * client's `newVersion` event tells the app.
 */
import { AUTOUPDATE } from '../ddp/autoupdate.js';
import type { Document } from './documents.js';
import type { LocalCollection } from './local-collection.js';
import type { Subscription } from './subscriptions.js';

/** `reload`: reload the page on a new version (the default in browsers); `keep`: keep it, only tell; false: do not watch. */
export type HotCodePush = 'reload' | 'keep' | false;

/** The client's side of it: what the watcher needs, so it stays apart from the connection logic. */
export interface VersionSource {
  subscribe(name: string): Subscription;
  collection(name: string): LocalCollection<Document>;
}

/** The default: reload where there is a page to reload. */
export function defaultHotCodePush(): HotCodePush {
  const location = (globalThis as { location?: { reload?: unknown } }).location;
  return typeof location?.reload === 'function' ? 'reload' : false;
}

/** Subscribes to the version and calls `changed` with each version that differs from the first one seen. */
export function watchVersion(source: VersionSource, changed: (version: string) => void): void {
  let known: string | undefined;
  source.subscribe(AUTOUPDATE.publication); // a server without it answers nosub: nothing to watch then
  source.collection(AUTOUPDATE.collection).onChange((change) => {
    if (change.type === 'removed' || change.id !== AUTOUPDATE.id) return;
    const version = change.doc.version;
    if (typeof version !== 'string') return;
    if (known === undefined) known = version;
    else if (version !== known) {
      known = version;
      changed(version);
    }
  });
}

export function reloadPage(): void {
  (globalThis as unknown as { location: { reload(): void } }).location.reload();
}
