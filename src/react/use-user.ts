/**
 * useUserId / useUser: the logged-in user (set by AccountsClient on the same
 * client) and their document as the server publishes it, re-rendering on
 * login, logout and changes to the document.
 */
import { useCallback, useSyncExternalStore } from 'react';
import type { ClientUser } from '../client/accounts.js';
import { useClient } from './context.js';

export function useUserId(): string | null {
  const client = useClient();
  const subscribe = useCallback((changed: () => void) => client.on('user', changed), [client]);
  const get = useCallback(() => client.userId(), [client]);
  return useSyncExternalStore(subscribe, get, get);
}

export function useUser<T extends object = ClientUser>(): T | undefined {
  const client = useClient();
  const userId = useUserId();
  const users = client.collection<T>('users');
  const subscribe = useCallback((changed: () => void) => users.onChange((change) => change.id === userId && changed()), [users, userId]);
  // findOne by id returns the stored document itself: the same object until it changes.
  const get = useCallback(() => (userId === null ? undefined : users.findOne(userId)), [users, userId]);
  return useSyncExternalStore(subscribe, get, get);
}
