/**
 * useFind / useFindOne: the results of a local query, re-rendering when they
 * change. The cursor's snapshot is read through useSyncExternalStore, so a
 * render never mixes two versions of the data (no tearing), and stays the
 * same array (and the same documents) until the results change.
 */
import { useMemo, useSyncExternalStore, type DependencyList } from 'react';
import type { LocalCursor } from '../client/local-cursor.js';

const NONE: readonly never[] = Object.freeze([]);
const noSubscription = () => () => undefined;
const nothing = () => NONE;

/** `factory` makes the cursor (`collection.cursor(selector, options)`), again only when `deps` change; null for none. */
export function useFind<T extends object>(factory: () => LocalCursor<T> | null | undefined, deps: DependencyList = []): readonly T[] {
  // The factory is the caller's; `deps` say when it gives another cursor, as with useMemo.
  const cursor = useMemo(factory, deps);
  // react-meteor-data's factory returns find(): here that is an array, which would render nothing, for good.
  if (cursor != null && typeof cursor.getSnapshot !== 'function') {
    throw new TypeError(`useFind's factory returned ${Array.isArray(cursor) ? 'an array' : typeof cursor}: return collection.cursor(selector, options), not find()`);
  }
  return useSyncExternalStore(cursor?.subscribe ?? noSubscription, cursor?.getSnapshot ?? nothing, cursor?.getSnapshot ?? nothing);
}

/** The first result of the cursor `factory` makes, or undefined. */
export function useFindOne<T extends object>(factory: () => LocalCursor<T> | null | undefined, deps: DependencyList = []): T | undefined {
  return useFind(factory, deps)[0];
}
